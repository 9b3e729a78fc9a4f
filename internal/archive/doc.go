// Package archive reads and writes the per-node archive of an object: a
// plain ZIP file (APPNOTE 6.3.x, stored entries, ZIP64 when offsets or
// counts need it) holding one chunk entry per block, named
// "obj.<block>.<stripe>" with the chunk's IEEE CRC-32 in its headers, then
// a JSON metadata entry ("ecstore.meta.json") that describes the whole
// object, then the central directory. docs/FORMAT.md has the bytes.
//
// Any ZIP tool can list and verify an archive (unzip -l, unzip -t). The
// writer streams, writing the ZIP records as archive/zip would, with 12
// bytes kept per entry for the central directory; the reader is its own: it
// gets the metadata and the central directory from a single read of the
// archive's tail, computes every chunk's data offset without further
// reads, and treats every count and offset as hostile. The package does
// no I/O of its own beyond the ReaderAt it is given; it does not encode
// or decode erasure codes.
package archive
