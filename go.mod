module github.com/ecstore/ecstore

go 1.26

require (
	github.com/klauspost/reedsolomon v1.14.2
	golang.org/x/sys v0.30.0
)

require github.com/klauspost/cpuid/v2 v2.3.0 // indirect
