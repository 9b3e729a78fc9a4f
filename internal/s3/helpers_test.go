package s3

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func md5sum(b []byte) []byte {
	s := md5.Sum(b)
	return s[:]
}

func crc32IEEE(b []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b))
}
