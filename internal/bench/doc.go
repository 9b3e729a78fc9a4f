// Package bench is a load generator for root:// servers: an ecstore
// gateway, an ecstore node or any plain XRootD data server. It is the
// library behind `ecstore bench` and bench/run.sh, in the manner of
// MinIO's warp.
//
// Run writes and reads objects under a fresh directory of its own,
// Config.Prefix/ecstore-bench-<time>-<random>, with Config.Concurrency
// workers. Each worker owns one connection (an internal/xrootd Client),
// dialled before the timed phase and reused for every operation; a worker
// whose connection breaks dials again before its next operation.
//
// # Modes
//
//   - put: every operation creates a new object (kXR_open with
//     kXR_new|kXR_mkpath, sequential kXR_write requests of at most
//     PieceSize bytes, optionally kXR_sync, kXR_close).
//   - get: Config.Objects objects are written first (untimed), then every
//     operation reads one of them whole (kXR_open, kXR_read requests of
//     at most PieceSize bytes, Config.ParallelReads of them outstanding,
//     kXR_close), cycling over the objects.
//   - mixed: like get, but each operation is a get with probability
//     Config.ReadFraction and otherwise a put of a new object; the choice
//     is drawn from a generator seeded with Config.Seed and the worker.
//   - small: many small objects in four timed phases, each reported as its
//     own operation type: put new objects, then stat them, get them
//     (both cycling over the objects put), then rm every one of them.
//     With Config.Duration D, the put, stat and get phases last D/4 each
//     and the rm phase as long as it takes; with Config.Ops N, each phase
//     runs ceil(N/4) operations (rm: as many as objects were put).
//   - random: Config.Objects objects are written first (untimed); each
//     worker opens one of them (worker i the object i mod Objects) before
//     the timed phase and every operation is one read request at offsets
//     drawn from the worker's generator: a kXR_read of Config.ReadSize
//     bytes, or with Config.Vector > 1 a kXR_readv of that many such
//     reads, sorted by offset, as ROOT's TTreeCache sends them. It is
//     reported as the operation type "read"; its MB/s counts the bytes
//     read.
//
// # What is measured
//
// The latency of a put spans open to the acknowledged close; of a get,
// open to close; of a stat or rm, the one request. Rates are wall-clock:
// the successful operations of a type divided by the time from the start
// of the phase in which they ran to the end of its last operation. A
// phase stops starting operations at its deadline or operation limit and
// lets those in flight finish. MB/s counts 10^6 bytes of object data.
//
// Latency percentiles come from a log-bucketed histogram (as in
// HdrHistogram): 64 linear sub-buckets per power of two of nanoseconds,
// so a reported percentile is within 1/128 (0.8 %) of a recorded latency
// and memory stays fixed (about 19 KiB per worker and operation type)
// however many operations run. Min and max are exact. Failed operations
// are counted but do not enter the latencies or rates.
//
// # Data
//
// Object content comes from one buffer filled once from a PCG generator
// seeded with Config.Seed, so writing costs no generation and reading
// back with Config.Verify costs one comparison. Object k's bytes
// [i*PieceSize, (i+1)*PieceSize) are a window of that buffer at an offset
// drawn from (seed, k, i): objects differ from each other and from piece
// to piece, and a piece served at the wrong offset or from the wrong
// object fails verification. The data is not meant to resist compression
// or deduplication (neither ecstore nor XRootD does either).
//
// # What is verified
//
// A put trusts the server's acknowledgements. A get checks that the
// object has the size written (the size the open returns, and the bytes
// every read returns); with Config.Verify it also compares every byte
// with the expected content. A stat in small mode checks the size.
//
// # Errors
//
// A failed operation is counted (with the first error of each operation
// type kept as text) and the run goes on; a broken connection is dialled
// again with a backoff of up to one second. Run fails only when it cannot
// start (bad configuration, no connection, a failed preparation write),
// or, returning its Result as well, when every timed operation failed
// (ErrAllFailed) or ctx was cancelled.
//
// # Cleanup
//
// Unless Config.KeepObjects is set, Run lists its directory when it is
// done (also after a cancellation, for up to a minute), removes every
// entry and then the directory, and then the directories of
// Config.Prefix that did not exist when it started (its puts make them
// with kXR_mkpath) while they are empty. Cleanup failures are reported in the
// Result, never as Run's error.
package bench
