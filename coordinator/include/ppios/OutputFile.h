// Opening a file ppios writes (PPIOS_STATS, PPIOS_TRACE, ppios-coord calibrate's CSV and
// plot) so that another local user cannot redirect it or make the writer hang: in a shared
// directory such as /tmp anyone may plant a symlink, a FIFO or a file of their own at the
// path, or a symlink in place of one of its directories, before the run.
//   - the path is walked one component at a time (openat): a symlinked directory is
//     followed only if it belongs to the caller or to root (who could redirect anything
//     anyway), and a symlink at the last component never;
//   - the file itself must be a regular file, checked before it is opened (a FIFO or a
//     device is never opened) and again on the descriptor; the open is O_NONBLOCK, so a
//     FIFO swapped in between fails (ENXIO) or is refused, it never blocks;
//   - a new file is created with O_EXCL, so nothing can be slipped in between;
//   - in a directory others may write to, an existing file is used only if it is ours and
//     has no other name (a hard link planted there to one of our files).
#pragma once

#include <string>

namespace ppios {

// Returns a descriptor open for writing (appending, or emptied first with `truncate`;
// blocking mode, close-on-exec), or -1 with a message naming the path in *error.
int open_output_file(const std::string &path, bool truncate, std::string *error);

}  // namespace ppios
