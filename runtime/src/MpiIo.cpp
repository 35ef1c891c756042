// MT-side MPI-IO calls (ppios_MPI_File_read, ...), the PT-side MPI-IO prefetch calls,
// and ppios_pt_start / ppios_MPI_Finalize.
//
// An MPI file's bytes are served from the cache only for independent reads through a
// contiguous file view (a displacement, and an etype and filetype with no holes: the
// default view, or one that skips a header) with a predefined contiguous datatype: then
// an offset or the individual file pointer, in etypes, is the file byte
// disp + offset x etype size, and the PT can fetch the same bytes through a POSIX
// descriptor of its own (which carries the view: ppios_pt_MPI_File_set_view, or the
// MT's view at a reopen).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ErrnoGuard.h"
#include "FileProbe.h"
#include "Immortal.h"
#include "PtThread.h"
#include "ThreadState.h"
#include "MpiTypes.h"
#include "PtBlocks.h"
#include "Runtime.h"
#include "SyncPoints.h"
#include "WrapSupport.h"
#include "ppios/ppios.h"

namespace ppios {
void mpi_file_written_passing(MPI_File fh);
}

using ppios::CachedFile;
using ppios::FileKey;
using ppios::MtStorageAccess;
using ppios::Runtime;
using ppios::RuntimeScope;

namespace {

struct MpiFileInfo {
  std::string path;
  FileKey key;
  // The name led to this file before and after MPI's open: it is the file MPI opened. Only
  // then are the handle's reads served from the cache (writes bump `key` either way).
  bool identity_sure = false;
  bool wrote = false;  // a write through the handle: its close is an own change too
  bool held = false;   // a nonblocking or split write: the file is held until the close
};

std::mutex g_files_mu;
ppios::Immortal<std::map<MPI_File, MpiFileInfo>> g_files;

// MPI says through which name it opens a file, and the MPI-IO components read names
// differently: Open MPI's OMPIO takes every name as it is ("ufs:a.dat" is a file of that
// name); ROMIO takes what precedes a colon after two or more characters as a file-system
// prefix, opens what follows if it knows the prefix (ufs:, nfs:, lustre:, in any case)
// and refuses the name otherwise. So a name leads to the file named by itself or, with
// such a colon, to the file named by what follows it: one file when only one of the two
// exists, or both are the same file; otherwise the runtime cannot tell which one MPI
// opened, and the handle is one of an unknown file (never prefetched; its writes change
// every file: Coherence::changed_unknown).
enum class NameLeads { One, Several, None };

NameLeads resolve_mpi_name(const char *filename, std::string *path, FileKey *key) {
  ppios::ErrnoGuard errno_guard;
  struct stat whole, after_colon;
  const bool whole_exists = stat(filename, &whole) == 0;
  const char *colon = std::strchr(filename, ':');
  const bool prefixed = colon != nullptr && colon - filename >= 2;
  const bool rest_exists = prefixed && stat(colon + 1, &after_colon) == 0;
  if (whole_exists && rest_exists && !(ppios::key_of(whole) == ppios::key_of(after_colon)))
    return NameLeads::Several;
  const struct stat *st = whole_exists ? &whole : rest_exists ? &after_colon : nullptr;
  if (st == nullptr || !S_ISREG(st->st_mode)) return NameLeads::None;
  *path = whole_exists ? std::string(filename) : std::string(colon + 1);
  *key = ppios::key_of(*st);
  return NameLeads::One;
}

// How a file view maps the offsets of reads (etypes) onto bytes of the file.
struct ViewMap {
  MPI_Offset disp = 0;     // file byte of view offset 0
  int64_t etype_size = 1;  // bytes per offset unit
  MPI_Offset file_offset(MPI_Offset view_offset) const { return disp + view_offset * etype_size; }
};

// The view of `fh` if it maps view bytes one to one onto the file's bytes from its
// displacement on: native representation and contiguous etype and filetype (the default
// view, or a displacement that skips a header). Other views (a filetype with holes)
// interleave the file, and their reads are never served from the cache.
bool contiguous_view(MPI_File fh, ViewMap *out) {
  MPI_Offset disp = 0;
  MPI_Datatype etype, filetype;
  char rep[MPI_MAX_DATAREP_STRING];
  if (MPI_File_get_view(fh, &disp, &etype, &filetype, rep) != MPI_SUCCESS) return false;
  int64_t etype_size = ppios::mpi_contiguous_size(etype);
  int64_t filetype_size = ppios::mpi_contiguous_size(filetype);
  bool plain = disp >= 0 && etype_size > 0 && filetype_size > 0 &&
               filetype_size % etype_size == 0 && std::strcmp(rep, "native") == 0;
  for (MPI_Datatype *t : {&etype, &filetype}) {  // derived types come back as copies
    int ni, na, nd, combiner;
    if (MPI_Type_get_envelope(*t, &ni, &na, &nd, &combiner) == MPI_SUCCESS &&
        combiner != MPI_COMBINER_NAMED)
      MPI_Type_free(t);
  }
  if (!plain) return false;
  out->disp = disp;
  out->etype_size = etype_size;
  return true;
}

// Finds the file behind `fh` if a read of `count` x `datatype` may come from the cache;
// sets *type_size and *view.
bool probe_mpi_read(MPI_File fh, int count, MPI_Datatype datatype, CachedFile *out,
                    int64_t *type_size, ViewMap *view) {
  if (count <= 0) return false;
  std::string path;
  FileKey registered;
  {
    std::lock_guard<std::mutex> lock(g_files_mu);
    auto it = g_files->find(fh);
    if (it == g_files->end() || !it->second.identity_sure) return false;
    path = it->second.path;
    registered = it->second.key;
  }
  ppios::mpi_type_sizes_init();
  *type_size = ppios::mpi_type_size(datatype);
  if (*type_size <= 0) return false;
  int amode = 0;
  if (MPI_File_get_amode(fh, &amode) != MPI_SUCCESS || (amode & MPI_MODE_WRONLY)) return false;
  // Whole items are whole etypes, so what is left of a partly served read starts at a
  // view offset.
  if (!contiguous_view(fh, view) || *type_size % view->etype_size != 0) return false;
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || !(ppios::key_of(st) == registered))
    return false;
  out->key = registered;
  out->stamp = ppios::stamp_of(st);
  return true;
}

// Bytes an MPI-IO transfer moved, from its status (the program's, or ours when it
// passed MPI_STATUS_IGNORE).
ssize_t transferred_bytes(int rc, MPI_Status *status) {
  if (rc != MPI_SUCCESS) return -1;
  MPI_Count bytes = 0;
  if (MPI_Get_elements_x(status, MPI_BYTE, &bytes) != MPI_SUCCESS || bytes == MPI_UNDEFINED) return 0;
  return static_cast<ssize_t>(bytes);
}

void set_status_bytes(MPI_Status *status, MPI_Count bytes) {
  if (status != MPI_STATUS_IGNORE) MPI_Status_set_elements_x(status, MPI_BYTE, bytes);
}

// A collective transfer (MPI_File_read_all, ...) is made by every process of the file's
// communicator: the MT always takes part, with the items the cache did not serve (none
// if it served them all), and calls it exactly once, or the others wait forever. It
// takes no coordinator slot: holding one while it waits for the other processes could
// hold up a process that waits for that slot before it joins (PPIOS_MT_THROTTLE=1).
enum class Transfer { Independent, Collective };

// MPI_File_read/_at/_all/_at_all with `at`, `buf`, `count` and `status` of their own.
int read_call(Transfer how, MPI_File fh, MPI_Offset at, void *buf, int count,
              MPI_Datatype datatype, MPI_Status *status) {
  if (how == Transfer::Collective)
    return at >= 0 ? MPI_File_read_at_all(fh, at, buf, count, datatype, status)
                   : MPI_File_read_all(fh, buf, count, datatype, status);
  return at >= 0 ? MPI_File_read_at(fh, at, buf, count, datatype, status)
                 : MPI_File_read(fh, buf, count, datatype, status);
}

// The shared body of the MPI-IO reads. `at` < 0 means "at the individual file pointer".
// Offsets and the file pointer count etypes of the view; `offset` is the file byte they
// map to.
int mpi_read_transfer(Transfer how, MPI_File fh, MPI_Offset at, void *buf, int count,
                      MPI_Datatype datatype, MPI_Status *status);

// A collective read is a release and an acquire point too.
int mpi_read(Transfer how, MPI_File fh, MPI_Offset at, void *buf, int count,
             MPI_Datatype datatype, MPI_Status *status) {
  if (how == Transfer::Independent) return mpi_read_transfer(how, fh, at, buf, count, datatype, status);
  ppios::release_point(nullptr);
  const int rc = mpi_read_transfer(how, fh, at, buf, count, datatype, status);
  ppios::acquire_point(nullptr);
  return rc;
}

int mpi_read_transfer(Transfer how, MPI_File fh, MPI_Offset at, void *buf, int count,
                      MPI_Datatype datatype, MPI_Status *status) {
  Runtime &rt = Runtime::get();
  const bool explicit_offset = at >= 0;
  const bool collective = how == Transfer::Collective;
  // A status of our own when the program ignores it: the bytes still count in the stats.
  MPI_Status own_status;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &own_status : status;
  auto original = [&] { return read_call(how, fh, at, buf, count, datatype, st); };
  CachedFile file;
  int64_t type_size = 0;
  ViewMap view;
  MPI_Offset position = at;
  bool cacheable = rt.caching() && probe_mpi_read(fh, count, datatype, &file, &type_size, &view);
  if (cacheable && !explicit_offset) cacheable = MPI_File_get_position(fh, &position) == MPI_SUCCESS;
  int rc = MPI_SUCCESS;
  if (!cacheable) {
    rt.mt_read(nullptr, at, 0, nullptr, [&](size_t, MtStorageAccess &storage) -> ssize_t {
      if (collective) storage.reaches(ppios::Reaches::Other);
      storage.acquire();
      rc = original();
      return transferred_bytes(rc, st);
    });
    return rc;
  }
  const size_t total = static_cast<size_t>(count) * static_cast<size_t>(type_size);
  const MPI_Offset offset = view.file_offset(position);
  auto etypes = [&](size_t bytes) { return static_cast<MPI_Offset>(bytes) / view.etype_size; };
  char *out = static_cast<char *>(buf);
  rt.mt_read(&file, offset, total, out, [&](size_t h, MtStorageAccess &storage) -> ssize_t {
    // Whole items only, so the rest is again `datatype` items.
    size_t whole = h - h % static_cast<size_t>(type_size);
    if (collective) storage.reaches(ppios::Reaches::Other);
    if (whole > 0 && whole == total && !collective) {
      if (!explicit_offset) MPI_File_seek(fh, position + etypes(total), MPI_SEEK_SET);
      set_status_bytes(status, static_cast<MPI_Count>(total));
      return static_cast<ssize_t>(total);
    }
    storage.acquire();
    MPI_Status rest;
    int left = count - static_cast<int>(whole / static_cast<size_t>(type_size));
    MPI_Offset rest_at = position + etypes(whole);
    if (explicit_offset) {
      rc = read_call(how, fh, rest_at, out + whole, left, datatype, &rest);
    } else {
      rc = MPI_File_seek(fh, rest_at, MPI_SEEK_SET);
      if (rc == MPI_SUCCESS) rc = read_call(how, fh, -1, out + whole, left, datatype, &rest);
    }
    if (rc != MPI_SUCCESS) {
      if (!explicit_offset) MPI_File_seek(fh, position, MPI_SEEK_SET);
      // Let the original call, as a whole, report what went wrong; a collective one has
      // been made already, and its error is the answer.
      if (!collective) rc = original();
      return -1;
    }
    MPI_Count got = 0;
    MPI_Get_elements_x(&rest, MPI_BYTE, &got);
    set_status_bytes(status, static_cast<MPI_Count>(whole) + got);
    return static_cast<ssize_t>(whole + static_cast<size_t>(got));
  });
  return rc;
}

// Handles of unknown files (not in g_files: a name that may lead to two files, an open
// the runtime did not see) that wrote, until their close: true once one of their writes
// was nonblocking (Coherence::unknown_writes_begin, ended at the close).
ppios::Immortal<std::map<MPI_File, bool>> g_unknown_writers;  // guarded by g_files_mu

// Called with g_files_mu held: a write through `fh`, of an unknown file.
void note_unknown_writer(MPI_File fh, bool nonblocking) {
  bool &async = (*g_unknown_writers)[fh];
  if (nonblocking && !async) {
    async = true;
    ppios::Coherence::unknown_writes_begin();
  }
}

// The file of `fh`, which the caller is about to change through it (false: a handle of a
// file the runtime does not know, whose change is one of every file). Where the runtime
// may not be entered (`entered` false) the handle's lock may be held by frames a jump
// abandoned: then the file is unknown too.
bool handle_written(MPI_File fh, FileKey *key, bool entered = true) {
  std::unique_lock<std::mutex> lock(g_files_mu, std::defer_lock);
  if (entered) lock.lock();
  else if (!lock.try_lock()) return false;
  auto it = g_files->find(fh);
  if (it == g_files->end()) {
    note_unknown_writer(fh, false);
    return false;
  }
  it->second.wrote = true;
  *key = it->second.key;
  return true;
}

// A nonblocking or split write through `fh`: its bytes land when MPI completes it, which
// the runtime does not see, so the file is held until the handle is closed. A handle of
// an unknown file makes every release and acquire point a change of every file instead.
void hold_for_nonblocking_write(MPI_File fh, bool entered) {
  FileKey key;
  {
    std::unique_lock<std::mutex> lock(g_files_mu, std::defer_lock);
    if (entered) lock.lock();
    else if (!lock.try_lock()) return ppios::Coherence::unknown_writes_begin();  // never ended: drops more
    auto it = g_files->find(fh);
    if (it == g_files->end()) return note_unknown_writer(fh, true);
    if (it->second.held) return;
    it->second.held = true;
    key = it->second.key;
  }
  ppios::ErrnoGuard errno_guard;
  if (entered) Runtime::get().coherence().hold(key);
  else ppios::ChangeGenerations::node().hold(key);  // held for the process (the close gives back only its own)
}

// An own change through `fh` is over: of its file, or of every file.
void handle_changed(bool known, const FileKey &key, bool entered) {
  ppios::ErrnoGuard errno_guard;
  if (known) {
    if (entered) Runtime::get().coherence().changed(key);
    else ppios::ChangeGenerations::node().bump(key);
  } else {
    if (entered) Runtime::get().coherence().changed_unknown();
    else ppios::ChangeGenerations::node().bump_everything();
  }
}

int mpi_write(Transfer how, MPI_File fh, MPI_Offset at, const void *buf, int count,
              MPI_Datatype datatype, MPI_Status *status) {
  Runtime &rt = Runtime::get();
  FileKey key;
  const bool known = handle_written(fh, &key);
  MPI_Status own_status;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &own_status : status;
  int rc = MPI_SUCCESS;
  if (how == Transfer::Collective) ppios::release_point(nullptr);
  rt.mt_write(known ? &key : nullptr, -1,
              [&]() -> ssize_t {
                const bool explicit_offset = at >= 0;
                if (how == Transfer::Collective)
                  rc = explicit_offset ? MPI_File_write_at_all(fh, at, buf, count, datatype, st)
                                       : MPI_File_write_all(fh, buf, count, datatype, st);
                else
                  rc = explicit_offset ? MPI_File_write_at(fh, at, buf, count, datatype, st)
                                       : MPI_File_write(fh, buf, count, datatype, st);
                return transferred_bytes(rc, st);
              },
              how == Transfer::Independent ? ppios::Reaches::Storage : ppios::Reaches::Other);
  if (!known) handle_changed(false, key, true);
  if (how == Transfer::Collective) ppios::acquire_point(nullptr);
  return rc;
}

enum class FileChange { Change, Hold };

// Where the runtime may not be entered (an MPI callback the runtime's own call runs, the
// rest of a thread that jumped out of a handler inside the runtime), a change still tells
// the table (dispatch's effects, WrapSupport.h).
template <class Call>
int mpi_file_change(MPI_File fh, FileChange how, const void *site, Call call) {
  if (ppios::pass_through()) {
    FileKey key;
    if (how == FileChange::Hold) {
      hold_for_nonblocking_write(fh, false);
      return call();
    }
    const int rc = call();
    const bool known = handle_written(fh, &key, false);
    handle_changed(known, key, false);
    return rc;
  }
  RuntimeScope scope(site);
  ppios::release_point(nullptr);
  int rc;
  FileKey key;
  if (how == FileChange::Hold) {
    hold_for_nonblocking_write(fh, true);
    rc = call();
  } else if (handle_written(fh, &key)) {
    ppios::Coherence &coherence = Runtime::get().coherence();
    coherence.begin_change(key);
    rc = call();
    ppios::ErrnoGuard errno_guard;
    coherence.end_change(key);
  } else {
    rc = call();
    handle_changed(false, key, true);
  }
  ppios::acquire_point(nullptr);
  return rc;
}

}  // namespace

// A blocking MPI-IO write that passed straight through (dispatch's effect, Interpose.cpp).
void ppios::mpi_file_written_passing(MPI_File fh) {
  FileKey key;
  const bool known = handle_written(fh, &key, false);
  handle_changed(known, key, false);
}

extern "C" {

int ppios_MPI_Type_commit(MPI_Datatype *datatype) {
  int rc = MPI_Type_commit(datatype);
  if (rc == MPI_SUCCESS) ppios::mpi_type_committed(*datatype);
  return rc;
}

int ppios_MPI_Type_free(MPI_Datatype *datatype) {
  ppios::mpi_type_freed(*datatype);
  return MPI_Type_free(datatype);
}

// MPI does not say which file it opened, only through which name: the file is the one
// the name leads to both before and after the open. If the name led elsewhere meanwhile
// (another process renamed a file over it during the open), or to nothing before (the
// open created it), the handle's reads are never served from the cache, which could
// otherwise hand out the bytes of the file the name leads to now. Its writes still bump
// the file the name leads to after the open.
int ppios_MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info,
                        MPI_File *fh) {
  ppios::release_point(nullptr);
  std::string path_before, path;
  FileKey before, key;
  const bool named = filename != nullptr && resolve_mpi_name(filename, &path_before, &before) == NameLeads::One;
  int rc = MPI_File_open(comm, filename, amode, info, fh);
  Runtime &rt = Runtime::get();
  ppios::ErrnoGuard errno_guard;
  if (rc == MPI_SUCCESS && filename != nullptr && resolve_mpi_name(filename, &path, &key) == NameLeads::One) {
    if (rt.trace().enabled()) {
      char *absolute = realpath(path.c_str(), nullptr);
      rt.trace().name_path(key, absolute != nullptr ? absolute : path);
      free(absolute);
    }
    MpiFileInfo file{path, key};
    file.identity_sure = named && before == key && path_before == path;
    std::lock_guard<std::mutex> lock(g_files_mu);
    (*g_files)[*fh] = file;
  }
  ppios::acquire_point(nullptr);  // collective
  return rc;
}

// Collective: an acquire point. A handle that wrote changed its file (drivers may write
// behind), and one with nonblocking writes gives its hold back.
int ppios_MPI_File_close(MPI_File *fh) {
  MpiFileInfo info;
  bool known = false, unknown_writer = false, unknown_async = false;
  {
    std::lock_guard<std::mutex> lock(g_files_mu);
    auto it = g_files->find(*fh);
    if (it != g_files->end()) {
      info = it->second;
      known = true;
      g_files->erase(it);
    }
    auto unknown = g_unknown_writers->find(*fh);
    if (unknown != g_unknown_writers->end()) {
      unknown_writer = true;
      unknown_async = unknown->second;
      g_unknown_writers->erase(unknown);
    }
  }
  ppios::release_point(nullptr);
  int rc = MPI_File_close(fh);
  if (unknown_writer) {  // its writes are in (drivers may write behind): a last change
    ppios::ErrnoGuard errno_guard;
    Runtime::get().coherence().changed_unknown();
    if (unknown_async) ppios::Coherence::unknown_writes_end();
  }
  if (known) {
    ppios::ErrnoGuard errno_guard;
    ppios::Coherence &coherence = Runtime::get().coherence();
    if (info.held) coherence.unhold(info.key);
    else if (info.wrote) coherence.changed(info.key);
    ppios::PtResources &resources = ppios::PtResources::get();
    if (resources.program_may_hold_locks()) resources.program_closed(info.key);
  }
  ppios::acquire_point(nullptr);
  return rc;
}

int ppios_MPI_File_read(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status) {
  return mpi_read(Transfer::Independent, fh, -1, buf, count, datatype, status);
}

int ppios_MPI_File_read_at(MPI_File fh, MPI_Offset offset, void *buf, int count,
                           MPI_Datatype datatype, MPI_Status *status) {
  if (offset < 0) return MPI_File_read_at(fh, offset, buf, count, datatype, status);
  return mpi_read(Transfer::Independent, fh, offset, buf, count, datatype, status);
}

int ppios_MPI_File_read_all(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                            MPI_Status *status) {
  return mpi_read(Transfer::Collective, fh, -1, buf, count, datatype, status);
}

int ppios_MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count,
                               MPI_Datatype datatype, MPI_Status *status) {
  if (offset < 0) return MPI_File_read_at_all(fh, offset, buf, count, datatype, status);
  return mpi_read(Transfer::Collective, fh, offset, buf, count, datatype, status);
}

int ppios_MPI_File_write(MPI_File fh, const void *buf, int count, MPI_Datatype datatype,
                         MPI_Status *status) {
  return mpi_write(Transfer::Independent, fh, -1, buf, count, datatype, status);
}

int ppios_MPI_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count,
                            MPI_Datatype datatype, MPI_Status *status) {
  if (offset < 0) return MPI_File_write_at(fh, offset, buf, count, datatype, status);
  return mpi_write(Transfer::Independent, fh, offset, buf, count, datatype, status);
}

int ppios_MPI_File_write_all(MPI_File fh, const void *buf, int count, MPI_Datatype datatype,
                             MPI_Status *status) {
  return mpi_write(Transfer::Collective, fh, -1, buf, count, datatype, status);
}

int ppios_MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count,
                                MPI_Datatype datatype, MPI_Status *status) {
  if (offset < 0) return MPI_File_write_at_all(fh, offset, buf, count, datatype, status);
  return mpi_write(Transfer::Collective, fh, offset, buf, count, datatype, status);
}

int ppios_MPI_File_seek(MPI_File fh, MPI_Offset offset, int whence) {
  return MPI_File_seek(fh, offset, whence);
}

// The other MPI-IO calls that change a file, declared once: X(name, parameters,
// arguments, how). Change: a blocking change, bracketed as an own change (Coherence);
// Hold: a nonblocking or split write (hold_for_nonblocking_write). Each is a release point
// before and an acquire point after (most are collective). Their reads are not served
// from the cache.
#define PPIOS_MPI_FILE_CHANGES(X)                                                               \
  X(MPI_File_write_shared, (MPI_File fh, const void *b, int n, MPI_Datatype t, MPI_Status *st),  \
    (fh, b, n, t, st), Change)                                                                  \
  X(MPI_File_write_ordered, (MPI_File fh, const void *b, int n, MPI_Datatype t, MPI_Status *st), \
    (fh, b, n, t, st), Change)                                                                  \
  X(MPI_File_write_all_end, (MPI_File fh, const void *b, MPI_Status *st), (fh, b, st), Change)  \
  X(MPI_File_write_at_all_end, (MPI_File fh, const void *b, MPI_Status *st), (fh, b, st), Change) \
  X(MPI_File_write_ordered_end, (MPI_File fh, const void *b, MPI_Status *st), (fh, b, st), Change) \
  X(MPI_File_set_size, (MPI_File fh, MPI_Offset size), (fh, size), Change)                      \
  X(MPI_File_preallocate, (MPI_File fh, MPI_Offset size), (fh, size), Change)                   \
  X(MPI_File_iwrite, (MPI_File fh, const void *b, int n, MPI_Datatype t, MPI_Request *rq),      \
    (fh, b, n, t, rq), Hold)                                                                    \
  X(MPI_File_iwrite_at, (MPI_File fh, MPI_Offset o, const void *b, int n, MPI_Datatype t,       \
                         MPI_Request *rq), (fh, o, b, n, t, rq), Hold)                          \
  X(MPI_File_iwrite_all, (MPI_File fh, const void *b, int n, MPI_Datatype t, MPI_Request *rq),  \
    (fh, b, n, t, rq), Hold)                                                                    \
  X(MPI_File_iwrite_at_all, (MPI_File fh, MPI_Offset o, const void *b, int n, MPI_Datatype t,   \
                             MPI_Request *rq), (fh, o, b, n, t, rq), Hold)                      \
  X(MPI_File_iwrite_shared, (MPI_File fh, const void *b, int n, MPI_Datatype t, MPI_Request *rq), \
    (fh, b, n, t, rq), Hold)                                                                    \
  X(MPI_File_write_all_begin, (MPI_File fh, const void *b, int n, MPI_Datatype t), (fh, b, n, t), Hold) \
  X(MPI_File_write_at_all_begin, (MPI_File fh, MPI_Offset o, const void *b, int n, MPI_Datatype t), \
    (fh, o, b, n, t), Hold)                                                                     \
  X(MPI_File_write_ordered_begin, (MPI_File fh, const void *b, int n, MPI_Datatype t), (fh, b, n, t), Hold)


#define PPIOS_DEFINE_MPI_FILE_CHANGE(name, params, args, how)                                   \
  int __wrap_##name params {                                                                    \
    if (ppios::on_pt()) return MPI_ERR_OTHER;                                                   \
    return mpi_file_change(fh, FileChange::how, __builtin_return_address(0), [&] { return name args; }); \
  }
PPIOS_MPI_FILE_CHANGES(PPIOS_DEFINE_MPI_FILE_CHANGE)
#undef PPIOS_DEFINE_MPI_FILE_CHANGE

// ------------------------------------------------------------------ PT side
// The helpers below are static: inside extern "C" an unnamed namespace does not keep
// GCC from exporting a name, and a program's own global of that name would take its place
// (test runtime.exports).

namespace {
// A PT handle is a token of type MPI_File that encodes the PT's descriptor (fd + 1, so
// that a failed open is the null token); it never reaches MPI.
static int pt_fd(ppios_pt_mpi_file fh) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(fh)) - 1;
}
static ppios_pt_mpi_file pt_token(int fd) {
  return fd < 0 ? nullptr : reinterpret_cast<ppios_pt_mpi_file>(static_cast<uintptr_t>(fd) + 1);
}
}  // namespace

namespace {
// The views of the PT's MPI handles that are not the default one, by descriptor. The MT
// sets one at a reopen, the PT at ppios_pt_MPI_File_set_view; `usable` false: the view
// interleaves the file (or is not known), and the handle's reads are not prefetched.
struct PtView {
  ViewMap map;
  bool usable = true;
};
static std::mutex g_pt_views_mu;
static ppios::Immortal<std::map<int, PtView>> g_pt_views;

static void set_pt_view(int fd, const PtView *view) {
  std::lock_guard<std::mutex> lock(g_pt_views_mu);
  if (view == nullptr) g_pt_views->erase(fd);
  else (*g_pt_views)[fd] = *view;
}

static PtView pt_view(int fd) {
  std::lock_guard<std::mutex> lock(g_pt_views_mu);
  auto it = g_pt_views->find(fd);
  return it == g_pt_views->end() ? PtView{} : it->second;
}
}  // namespace

int ppios_pt_MPI_File_open(const char *filename, int /*amode*/, ppios_pt_mpi_file *fh) {
  ppios::pt_checkpoint();
  // Only a name that leads to one file: the PT must not read another one than MPI's.
  std::string path;
  FileKey key;
  const NameLeads leads = resolve_mpi_name(filename, &path, &key);
  int fd = leads == NameLeads::One ? ppios::PtResources::get().open_regular(path.c_str()) : -1;
  if (leads != NameLeads::One) errno = leads == NameLeads::None ? ENOENT : EACCES;
  *fh = pt_token(fd);
  if (fd >= 0) {
    set_pt_view(fd, nullptr);
    return MPI_SUCCESS;
  }
  return errno == ENOENT ? MPI_ERR_NO_SUCH_FILE : MPI_ERR_FILE;
}

ppios_pt_mpi_file ppios_pt_reopen_MPI_File(MPI_File mt_fh) {
  if (!Runtime::get().caching()) return nullptr;  // mode off: no PT will take it
  std::string path;
  {
    std::lock_guard<std::mutex> lock(g_files_mu);
    auto it = g_files->find(mt_fh);
    if (it == g_files->end() || !it->second.identity_sure) return nullptr;  // nothing to serve
    path = it->second.path;
  }
  // The MT's view goes with the handle: its file pointer counts etypes of that view.
  PtView view;
  view.usable = contiguous_view(mt_fh, &view.map);
  MPI_Offset position = 0;
  if (MPI_File_get_position(mt_fh, &position) != MPI_SUCCESS) return nullptr;
  int fd = ppios::PtResources::get().open_regular(path.c_str());
  off_t at = static_cast<off_t>(view.usable ? view.map.file_offset(position) : 0);
  if (fd >= 0 && lseek(fd, at, SEEK_SET) < 0) {
    ppios::pt_disown_fd(fd);
    ppios::PtResources::get().close_runtime_fd(fd);
    fd = -1;
  }
  if (fd >= 0) set_pt_view(fd, &view);
  return pt_token(fd);
}

void ppios_mt_handoff_MPI_File(unsigned slot, MPI_File mt_fh) {
  Runtime &runtime = Runtime::get();
  if (runtime.pt_running())
    runtime.handoff_post(slot, reinterpret_cast<intptr_t>(ppios_pt_reopen_MPI_File(mt_fh)));
}

ppios_pt_mpi_file ppios_pt_take_MPI_File(unsigned slot) {
  ppios::pt_checkpoint();
  intptr_t handle = 0;
  if (!Runtime::get().handoff_take(slot, &handle)) ppios::pt_checkpoint();  // stopping
  return reinterpret_cast<ppios_pt_mpi_file>(handle);
}

int ppios_pt_MPI_File_close(ppios_pt_mpi_file *fh) {
  ppios::pt_checkpoint();
  int fd = pt_fd(*fh);
  if (fd >= 0 && ppios::PtResources::get().owns_fd(fd)) {
    set_pt_view(fd, nullptr);
    ppios::pt_disown_fd(fd);
    ppios::PtResources::get().close_runtime_fd(fd);
  }
  *fh = nullptr;
  return MPI_SUCCESS;
}

int ppios_pt_MPI_File_set_view(ppios_pt_mpi_file fh, MPI_Offset disp, MPI_Datatype etype,
                               MPI_Datatype filetype, const char *datarep, MPI_Info /*info*/) {
  ppios::pt_checkpoint();
  int fd = pt_fd(fh);
  if (!ppios::PtResources::get().owns_fd(fd)) return MPI_ERR_FILE;
  // Only sizes measured before the PT started: the PT makes no MPI calls.
  PtView view;
  int64_t etype_size = ppios::mpi_type_size(etype);
  int64_t filetype_size = ppios::mpi_type_size(filetype);
  view.usable = disp >= 0 && etype_size > 0 && filetype_size > 0 &&
                filetype_size % etype_size == 0 && datarep != nullptr &&
                std::strcmp(datarep, "native") == 0;
  view.map.disp = disp;
  view.map.etype_size = etype_size > 0 ? etype_size : 1;
  set_pt_view(fd, &view);
  // Like MPI_File_set_view: the file pointer goes to the start of the view.
  lseek(fd, static_cast<off_t>(view.usable ? disp : 0), SEEK_SET);
  return MPI_SUCCESS;
}

int ppios_pt_MPI_File_seek(ppios_pt_mpi_file fh, MPI_Offset offset, int whence) {
  ppios::pt_checkpoint();
  int fd = pt_fd(fh);
  if (!ppios::PtResources::get().owns_fd(fd)) return MPI_ERR_FILE;
  int w = whence == MPI_SEEK_SET ? SEEK_SET : whence == MPI_SEEK_CUR ? SEEK_CUR
        : whence == MPI_SEEK_END ? SEEK_END : -1;
  if (w < 0 || fd < 0) return MPI_ERR_ARG;
  PtView view = pt_view(fd);
  if (!view.usable) return MPI_ERR_ARG;
  off_t bytes = static_cast<off_t>(offset * view.map.etype_size);
  if (w == SEEK_SET) bytes += static_cast<off_t>(view.map.disp);
  return lseek(fd, bytes, w) < 0 ? MPI_ERR_ARG : MPI_SUCCESS;
}

int ppios_pt_MPI_File_get_size(ppios_pt_mpi_file fh, MPI_Offset *size) {
  ppios::pt_checkpoint();
  struct stat st;
  if (!ppios::PtResources::get().owns_fd(pt_fd(fh)) || fstat(pt_fd(fh), &st) != 0) return MPI_ERR_FILE;
  *size = static_cast<MPI_Offset>(st.st_size);
  return MPI_SUCCESS;
}

namespace {
// What the PT's statuses say: the bytes each prefetch predicted for it (-1: unknown), by
// the status's address. Only the PT reads and writes it. A handful of statuses in
// practice; a program that walks an array of them is bounded by forgetting them all.
static thread_local std::unordered_map<const MPI_Status *, int64_t> t_pt_status_bytes;
constexpr size_t kMaxPtStatuses = 4096;

// Ends a PT prefetch of an MPI read: `items` predicted (-1: unknown) of `type_size` bytes.
// Like the read, it returns an MPI code: the items are in the status.
static int predicted(MPI_Status *status, int64_t items, int64_t type_size) {
  if (status != MPI_STATUS_IGNORE) {
    std::memset(static_cast<void *>(status), 0, sizeof *status);  // MPI_SUCCESS, as predicted
    if (t_pt_status_bytes.size() >= kMaxPtStatuses) t_pt_status_bytes.clear();
    t_pt_status_bytes[status] = items < 0 ? -1 : items * type_size;
  }
  return items < 0 ? MPI_ERR_UNKNOWN : MPI_SUCCESS;
}

// Whether a PT prefetch of `datatype` items through `fd` can be mapped onto file bytes:
// sets *type_size and *view. A datatype or a view that is not contiguous (or that the
// runtime does not know) is counted in pt_unmapped, so that a read ppios-cc reported as
// prefetched, yet never served, has a visible reason.
static bool mappable(int fd, MPI_Datatype datatype, int64_t *type_size, PtView *view) {
  if (fd < 0) return false;
  *type_size = ppios::mpi_type_size(datatype);
  *view = pt_view(fd);
  if (*type_size > 0 && view->usable) return true;
  Runtime::get().stats().pt_unmapped++;
  return false;
}
}  // namespace

int ppios_prefetch_MPI_File_read_at(ppios_pt_mpi_file fh, MPI_Offset offset, int count,
                                    MPI_Datatype datatype, MPI_Status *status, ppios_seq_t seq,
                                    unsigned flags, const char *site) {
  int64_t type_size = 0;
  PtView view;
  if (count < 0 || offset < 0 || !mappable(pt_fd(fh), datatype, &type_size, &view))
    return predicted(status, -1, 0);
  ssize_t bytes = ppios_prefetch_pread(pt_fd(fh),
                                       static_cast<size_t>(count) * static_cast<size_t>(type_size),
                                       static_cast<off_t>(view.map.file_offset(offset)), seq, flags,
                                       site);
  return predicted(status, bytes < 0 ? -1 : bytes / type_size, type_size);
}

int ppios_prefetch_MPI_File_read(ppios_pt_mpi_file fh, int count, MPI_Datatype datatype,
                                 MPI_Status *status, ppios_seq_t seq, unsigned flags,
                                 const char *site) {
  ppios::pt_checkpoint();
  int fd = pt_fd(fh);
  int64_t type_size = 0;
  PtView view;
  if (!ppios::PtResources::get().owns_fd(fd) || count < 0 ||
      !mappable(fd, datatype, &type_size, &view))
    return predicted(status, -1, 0);
  off_t offset = lseek(fd, 0, SEEK_CUR);  // a file byte: the view is applied
  if (offset < 0) return predicted(status, -1, 0);
  ssize_t bytes = ppios_prefetch_pread(fd, static_cast<size_t>(count) * static_cast<size_t>(type_size),
                                       offset, seq, flags, site);
  if (bytes < 0) return predicted(status, -1, 0);
  lseek(fd, offset + bytes, SEEK_SET);
  return predicted(status, bytes / type_size, type_size);
}

// The PT prefetches the bytes of this process's part of a collective read with reads
// of its own (it never takes part in a collective call: only the MT does).
int ppios_prefetch_MPI_File_read_all(ppios_pt_mpi_file fh, int count, MPI_Datatype datatype,
                                     MPI_Status *status, ppios_seq_t seq, unsigned flags,
                                     const char *site) {
  return ppios_prefetch_MPI_File_read(fh, count, datatype, status, seq, flags, site);
}

int ppios_prefetch_MPI_File_read_at_all(ppios_pt_mpi_file fh, MPI_Offset offset, int count,
                                        MPI_Datatype datatype, MPI_Status *status,
                                        ppios_seq_t seq, unsigned flags, const char *site) {
  return ppios_prefetch_MPI_File_read_at(fh, offset, count, datatype, status, seq, flags, site);
}

int ppios_prefetch_MPI_File_read_at_all_copy(ppios_pt_mpi_file fh, MPI_Offset offset, void *buf,
                                             int count, MPI_Datatype datatype,
                                             MPI_Status *status, ppios_seq_t seq, unsigned flags,
                                             const char *site) {
  return ppios_prefetch_MPI_File_read_at_copy(fh, offset, buf, count, datatype, status, seq, flags,
                                              site);
}

int ppios_prefetch_MPI_File_read_at_copy(ppios_pt_mpi_file fh, MPI_Offset offset, void *buf,
                                         int count, MPI_Datatype datatype, MPI_Status *status,
                                         ppios_seq_t seq, unsigned flags, const char *site) {
  int64_t type_size = 0;
  PtView view;
  if (count < 0 || offset < 0 || !mappable(pt_fd(fh), datatype, &type_size, &view))
    return predicted(status, -1, 0);
  ssize_t bytes = ppios_prefetch_pread_copy(
      pt_fd(fh), buf, static_cast<size_t>(count) * static_cast<size_t>(type_size),
      static_cast<off_t>(view.map.file_offset(offset)), seq, flags, site);
  return predicted(status, bytes < 0 ? -1 : bytes / type_size, type_size);
}

int ppios_pt_MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count) {
  ppios::pt_checkpoint();
  auto it = t_pt_status_bytes.find(status);
  int64_t bytes = it == t_pt_status_bytes.end() ? -1 : it->second;
  int64_t type_size = ppios::mpi_type_size(datatype);
  *count = bytes < 0 || type_size <= 0 || bytes % type_size != 0
               ? MPI_UNDEFINED
               : static_cast<int>(bytes / type_size);
  return MPI_SUCCESS;
}

int ppios_pt_MPI_Comm_rank(MPI_Comm comm, int *rank) {
  ppios::pt_checkpoint();
  int size = 0;
  if (!ppios::mpi_comm_known(comm, rank, &size)) ppios_pt_exit();
  return MPI_SUCCESS;
}

int ppios_pt_MPI_Comm_size(MPI_Comm comm, int *size) {
  ppios::pt_checkpoint();
  int rank = 0;
  if (!ppios::mpi_comm_known(comm, &rank, size)) ppios_pt_exit();
  return MPI_SUCCESS;
}

// Basic elements: each whole item of a contiguous type holds the same number of them.
int ppios_pt_MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype, int *count) {
  int items = MPI_UNDEFINED;
  ppios_pt_MPI_Get_count(status, datatype, &items);
  int64_t per_item = ppios::mpi_type_elements(datatype);
  *count = items == MPI_UNDEFINED || per_item <= 0 ? MPI_UNDEFINED
                                                   : static_cast<int>(items * per_item);
  return MPI_SUCCESS;
}

// ------------------------------------------------------------------ lifecycle

int ppios_pt_start(void (*entry)(void *ctx), const void *ctx, size_t ctx_size) {
  if (entry == nullptr || (ctx == nullptr && ctx_size > 0)) {
    errno = EINVAL;
    return -1;
  }
  Runtime::get().start_pt(entry, ctx, ctx_size);
  return 0;
}

ppios_seq_t ppios_mt_seq(void) { return Runtime::get().mt_transfers_started(); }

// Collective: a release and an acquire point like any other (the program may read after it).
int ppios_MPI_Finalize(void) {
  ppios::release_point(nullptr);
  Runtime::get().shutdown();
  const int rc = MPI_Finalize();
  ppios::acquire_point(nullptr);
  return rc;
}

}  // extern "C"
