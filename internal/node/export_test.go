package node

// Test hooks for the external tests of this package.

// SetProcFD sets whether l reads the attributes of listed files through
// /proc/self/fd (the default where /proc is mounted) or by opening them.
func SetProcFD(l *Local, on bool) { l.procFD = on }

// SetNoAttrs makes l behave as on a file system without user xattrs.
func SetNoAttrs(l *Local) { l.noAttr.Store(true) }

// LargeBuffersHeld is how many bytes of large staging buffers uploads of
// this process hold.
func LargeBuffersHeld() int64 { return largeBuffersHeld.Load() }

// LargeBufferBudget and LargeUploadBuffer expose the staging limits.
const (
	LargeBufferBudget = largeBufferBudget
	LargeUploadBuffer = largeUploadBuffer
)

// SetNoOpenat2 makes l open files as where the kernel has no openat2,
// through its os.Root alone.
func SetNoOpenat2(l *Local) {
	if l.beneath != nil {
		l.beneath.Close()
		l.beneath = nil
	}
}
