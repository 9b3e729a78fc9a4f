//go:build !(linux && (amd64 || arm64))

package main

import (
	"errors"
	"os"
)

// dropCache is only implemented on Linux (amd64, arm64).
func dropCache(*os.File) error {
	return errors.New("dropping pages from the page cache is not supported on this platform")
}
