// Release and acquire points of the MT (docs/design/coherence.md, rule 2), for the
// wrappers of calls that synchronize with other processes. Both do nothing where the
// runtime may not be entered (ThreadState.h, pass_through).
#pragma once

namespace ppios {

// Before a call that may order this process's changes before another process's reads.
void release_point(const void *site);
// After a call that may order another process's changes before this process's reads.
void acquire_point(const void *site);
// After a call that reaped a child process, a writer the node's table does not see
// (Coherence::note_child).
void acquire_after_child(const void *site);

}  // namespace ppios
