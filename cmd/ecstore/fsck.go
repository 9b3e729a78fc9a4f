package main

// fsck: reserved for the lead, who adds "ecstore fsck" here by calling
// internal/repair (report per object: healthy, degraded with the chunks
// and nodes concerned, or unrecoverable; exit 0 only when all are
// healthy) and registers it in the commands table in main.go, at the
// line marked "fsck". Nothing is registered for it yet.
