// Acquire points (docs/design/coherence.md, rule 2): the calls after which another
// process's change of a file may be ordered before the MT's next read. After each of
// them returns, the process drops every prefetched byte of a file whose change
// generation moved since it was fetched (Coherence::acquire_point).
//
// The MPI calls are declared once, in PPIOS_ACQUIRE_CALLS below (each also has its
// PPIOS_INTERPOSE line in ppios/interpose.def, which check_interpose.py compares). A
// send is one too: a synchronous send returns once the receiver got to its receive, after
// whatever the receiver changed before it. Nonblocking operations are acquire points
// where they complete (the waits and tests).
//
// File locks: taking a lock is an acquire point. A POSIX record lock (fcntl F_SETLK,
// F_SETLKW, lockf) is released by the close of any descriptor of the file, so the file
// is noted first (PtResources::note_program_lock) and the runtime defers the close of its
// own descriptors of it.
//
// The PT never calls MPI: there each fails with MPI_ERR_OTHER without reaching MPI.
#include <fcntl.h>
#include <mpi.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "ErrnoGuard.h"
#include "FileKey.h"
#include "PtThread.h"
#include "StreamHolds.h"
#include "SyncPoints.h"
#include "Runtime.h"
#include "ThreadState.h"
#include "WrapSupport.h"

using ppios::RuntimeScope;

namespace ppios {

namespace {
// The MT's synchronization step `step` of the coherence rule, where the runtime may be
// entered, with the call's site and errno kept.
void coherence_step(const void *site, void (Coherence::*step)()) {
  if (!ppios::synchronizes_coherence()) return;
  RuntimeScope scope(site);
  ppios::ErrnoGuard errno_guard;
  (ppios::Runtime::get().coherence().*step)();
}
}  // namespace

void release_point(const void *site) { coherence_step(site, &Coherence::release_point); }
void acquire_point(const void *site) { coherence_step(site, &Coherence::acquire_point); }
void acquire_after_child(const void *site) { coherence_step(site, &Coherence::child_reaped); }

}  // namespace ppios

namespace {
// A wait for a child: once `reaped(result)` says one was reaped, an acquire point after
// a writer the table does not see (a forked child's stores through a shared mapping, a
// program it exec'd): everything cached is dropped (Coherence::note_child). The PT never
// waits for a child.
template <class Wait, class Reaped>
auto reaped_child(const void *site, Wait wait_call, Reaped reaped) -> decltype(wait_call()) {
  if (ppios::on_pt()) {
    errno = ECHILD;
    return -1;
  }
  const auto result = wait_call();
  if (reaped(result)) ppios::acquire_after_child(site);
  return result;
}
// The wait calls return the child's pid (> 0) when they reaped one.
template <class Wait>
auto reaped_child(const void *site, Wait wait_call) -> decltype(wait_call()) {
  return reaped_child(site, wait_call, [](auto pid) { return pid > 0; });
}
}  // namespace

using ppios::acquire_point;
using ppios::release_point;

// X(name, parameters, arguments)
#define PPIOS_ACQUIRE_CALLS(X)                                                                  \
  X(MPI_Barrier, (MPI_Comm comm), (comm))                                                       \
  X(MPI_Bcast, (void *buf, int n, MPI_Datatype t, int root, MPI_Comm comm), (buf, n, t, root, comm)) \
  X(MPI_Reduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm), \
    (s, r, n, t, op, root, comm))                                                               \
  X(MPI_Allreduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm),   \
    (s, r, n, t, op, comm))                                                                     \
  X(MPI_Gather, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root, \
                 MPI_Comm comm), (s, sn, st, r, rn, rt, root, comm))                            \
  X(MPI_Gatherv, (const void *s, int sn, MPI_Datatype st, void *r, const int rn[], const int rd[], \
                  MPI_Datatype rt, int root, MPI_Comm comm), (s, sn, st, r, rn, rd, rt, root, comm)) \
  X(MPI_Allgather, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,   \
                    MPI_Comm comm), (s, sn, st, r, rn, rt, comm))                               \
  X(MPI_Allgatherv, (const void *s, int sn, MPI_Datatype st, void *r, const int rn[], const int rd[], \
                     MPI_Datatype rt, MPI_Comm comm), (s, sn, st, r, rn, rd, rt, comm))         \
  X(MPI_Scatter, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root, \
                  MPI_Comm comm), (s, sn, st, r, rn, rt, root, comm))                           \
  X(MPI_Scatterv, (const void *s, const int sn[], const int sd[], MPI_Datatype st, void *r, int rn, \
                   MPI_Datatype rt, int root, MPI_Comm comm), (s, sn, sd, st, r, rn, rt, root, comm)) \
  X(MPI_Alltoall, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,    \
                   MPI_Comm comm), (s, sn, st, r, rn, rt, comm))                                \
  X(MPI_Alltoallv, (const void *s, const int sn[], const int sd[], MPI_Datatype st, void *r,    \
                    const int rn[], const int rd[], MPI_Datatype rt, MPI_Comm comm),            \
    (s, sn, sd, st, r, rn, rd, rt, comm))                                                       \
  X(MPI_Alltoallw, (const void *s, const int sn[], const int sd[], const MPI_Datatype st[], void *r, \
                    const int rn[], const int rd[], const MPI_Datatype rt[], MPI_Comm comm),    \
    (s, sn, sd, st, r, rn, rd, rt, comm))                                                       \
  X(MPI_Reduce_scatter, (const void *s, void *r, const int rn[], MPI_Datatype t, MPI_Op op,     \
                         MPI_Comm comm), (s, r, rn, t, op, comm))                               \
  X(MPI_Reduce_scatter_block, (const void *s, void *r, int rn, MPI_Datatype t, MPI_Op op,       \
                               MPI_Comm comm), (s, r, rn, t, op, comm))                         \
  X(MPI_Scan, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm),        \
    (s, r, n, t, op, comm))                                                                     \
  X(MPI_Exscan, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm),      \
    (s, r, n, t, op, comm))                                                                     \
  X(MPI_Send, (const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm comm),           \
    (b, n, t, to, tag, comm))                                                                   \
  X(MPI_Ssend, (const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm comm),          \
    (b, n, t, to, tag, comm))                                                                   \
  X(MPI_Bsend, (const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm comm),          \
    (b, n, t, to, tag, comm))                                                                   \
  X(MPI_Rsend, (const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm comm),          \
    (b, n, t, to, tag, comm))                                                                   \
  X(MPI_Recv, (void *b, int n, MPI_Datatype t, int from, int tag, MPI_Comm comm, MPI_Status *st), \
    (b, n, t, from, tag, comm, st))                                                             \
  X(MPI_Sendrecv, (const void *s, int sn, MPI_Datatype st, int to, int stag, void *r, int rn,   \
                   MPI_Datatype rt, int from, int rtag, MPI_Comm comm, MPI_Status *status),     \
    (s, sn, st, to, stag, r, rn, rt, from, rtag, comm, status))                                 \
  X(MPI_Sendrecv_replace, (void *b, int n, MPI_Datatype t, int to, int stag, int from, int rtag, \
                           MPI_Comm comm, MPI_Status *st), (b, n, t, to, stag, from, rtag, comm, st)) \
  X(MPI_Wait, (MPI_Request *rq, MPI_Status *st), (rq, st))                                      \
  X(MPI_Waitall, (int n, MPI_Request rq[], MPI_Status st[]), (n, rq, st))                       \
  X(MPI_Waitany, (int n, MPI_Request rq[], int *i, MPI_Status *st), (n, rq, i, st))             \
  X(MPI_Waitsome, (int n, MPI_Request rq[], int *out, int idx[], MPI_Status st[]), (n, rq, out, idx, st)) \
  X(MPI_Test, (MPI_Request *rq, int *flag, MPI_Status *st), (rq, flag, st))                     \
  X(MPI_Testall, (int n, MPI_Request rq[], int *flag, MPI_Status st[]), (n, rq, flag, st))      \
  X(MPI_Testany, (int n, MPI_Request rq[], int *i, int *flag, MPI_Status *st), (n, rq, i, flag, st)) \
  X(MPI_Testsome, (int n, MPI_Request rq[], int *out, int idx[], MPI_Status st[]), (n, rq, out, idx, st)) \
  X(MPI_Probe, (int from, int tag, MPI_Comm comm, MPI_Status *st), (from, tag, comm, st))       \
  X(MPI_Iprobe, (int from, int tag, MPI_Comm comm, int *flag, MPI_Status *st), (from, tag, comm, flag, st)) \
  X(MPI_Mprobe, (int from, int tag, MPI_Comm comm, MPI_Message *m, MPI_Status *st),             \
    (from, tag, comm, m, st))                                                                   \
  X(MPI_Improbe, (int from, int tag, MPI_Comm comm, int *flag, MPI_Message *m, MPI_Status *st), \
    (from, tag, comm, flag, m, st))                                                             \
  X(MPI_Mrecv, (void *b, int n, MPI_Datatype t, MPI_Message *m, MPI_Status *st), (b, n, t, m, st)) \
  X(MPI_Win_fence, (int assert_, MPI_Win win), (assert_, win))                                  \
  X(MPI_Win_lock, (int type, int rank, int assert_, MPI_Win win), (type, rank, assert_, win))   \
  X(MPI_Win_unlock, (int rank, MPI_Win win), (rank, win))                                       \
  X(MPI_Win_lock_all, (int assert_, MPI_Win win), (assert_, win))                               \
  X(MPI_Win_unlock_all, (MPI_Win win), (win))                                                   \
  X(MPI_Win_flush, (int rank, MPI_Win win), (rank, win))                                        \
  X(MPI_Win_flush_all, (MPI_Win win), (win))                                                    \
  X(MPI_Win_sync, (MPI_Win win), (win))                                                         \
  X(MPI_Win_start, (MPI_Group group, int assert_, MPI_Win win), (group, assert_, win))          \
  X(MPI_Win_wait, (MPI_Win win), (win))                                                         \
  X(MPI_Win_test, (MPI_Win win, int *flag), (win, flag))                                        \
  X(MPI_Comm_dup, (MPI_Comm comm, MPI_Comm *out), (comm, out))                                  \
  X(MPI_Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *out), (comm, color, key, out)) \
  X(MPI_Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *out), (comm, group, out))       \
  X(MPI_Comm_split_type, (MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out),      \
    (comm, type, key, info, out))                                                               \
  X(MPI_Comm_create_group, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *out),            \
    (comm, group, tag, out))                                                                    \
  X(MPI_Intercomm_create, (MPI_Comm local, int leader, MPI_Comm bridge, int remote, int tag,    \
                           MPI_Comm *out), (local, leader, bridge, remote, tag, out))           \
  X(MPI_Intercomm_merge, (MPI_Comm inter, int high, MPI_Comm *out), (inter, high, out))         \
  X(MPI_Cart_create, (MPI_Comm comm, int nd, const int dims[], const int periods[], int reorder, \
                      MPI_Comm *out), (comm, nd, dims, periods, reorder, out))                  \
  X(MPI_Cart_sub, (MPI_Comm comm, const int remain[], MPI_Comm *out), (comm, remain, out))      \
  X(MPI_Graph_create, (MPI_Comm comm, int nn, const int index[], const int edges[], int reorder, \
                       MPI_Comm *out), (comm, nn, index, edges, reorder, out))                  \
  X(MPI_Dist_graph_create, (MPI_Comm comm, int n, const int nodes[], const int degrees[],       \
                            const int targets[], const int weights[], MPI_Info info, int reorder, \
                            MPI_Comm *out), (comm, n, nodes, degrees, targets, weights, info, reorder, out)) \
  X(MPI_Dist_graph_create_adjacent, (MPI_Comm comm, int indeg, const int srcs[], const int sw[], \
                                     int outdeg, const int dsts[], const int dw[], MPI_Info info, \
                                     int reorder, MPI_Comm *out),                               \
    (comm, indeg, srcs, sw, outdeg, dsts, dw, info, reorder, out))                              \
  X(MPI_Neighbor_allgather, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, \
                             MPI_Comm comm), (s, sn, st, r, rn, rt, comm))                      \
  X(MPI_Neighbor_allgatherv, (const void *s, int sn, MPI_Datatype st, void *r, const int rn[],  \
                              const int rd[], MPI_Datatype rt, MPI_Comm comm), (s, sn, st, r, rn, rd, rt, comm)) \
  X(MPI_Neighbor_alltoall, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, \
                            MPI_Comm comm), (s, sn, st, r, rn, rt, comm))                       \
  X(MPI_Neighbor_alltoallv, (const void *s, const int sn[], const int sd[], MPI_Datatype st, void *r, \
                             const int rn[], const int rd[], MPI_Datatype rt, MPI_Comm comm),   \
    (s, sn, sd, st, r, rn, rd, rt, comm))                                                       \
  X(MPI_Neighbor_alltoallw, (const void *s, const int sn[], const MPI_Aint sd[], const MPI_Datatype st[], \
                             void *r, const int rn[], const MPI_Aint rd[], const MPI_Datatype rt[], \
                             MPI_Comm comm), (s, sn, sd, st, r, rn, rd, rt, comm))              \
  X(MPI_Win_create, (void *base, MPI_Aint size, int unit, MPI_Info info, MPI_Comm comm, MPI_Win *win), \
    (base, size, unit, info, comm, win))                                                        \
  X(MPI_Win_allocate, (MPI_Aint size, int unit, MPI_Info info, MPI_Comm comm, void *base, MPI_Win *win), \
    (size, unit, info, comm, base, win))                                                        \
  X(MPI_Win_allocate_shared, (MPI_Aint size, int unit, MPI_Info info, MPI_Comm comm, void *base, \
                              MPI_Win *win), (size, unit, info, comm, base, win))               \
  X(MPI_Win_create_dynamic, (MPI_Info info, MPI_Comm comm, MPI_Win *win), (info, comm, win))    \
  X(MPI_Win_free, (MPI_Win *win), (win))                                                        \
  X(MPI_Win_post, (MPI_Group group, int assert_, MPI_Win win), (group, assert_, win))           \
  X(MPI_Win_complete, (MPI_Win win), (win))                                                     \
  X(MPI_Request_get_status, (MPI_Request rq, int *flag, MPI_Status *st), (rq, flag, st))        \
  X(MPI_File_sync, (MPI_File fh), (fh))                                                         \
  X(MPI_File_set_view, (MPI_File fh, MPI_Offset disp, MPI_Datatype et, MPI_Datatype ft,          \
                        const char *rep, MPI_Info info), (fh, disp, et, ft, rep, info))         \
  X(MPI_File_set_atomicity, (MPI_File fh, int flag), (fh, flag))

extern "C" {

#define PPIOS_DEFINE_ACQUIRE(name, params, args)       \
  int __wrap_##name params {                           \
    if (ppios::on_pt()) return MPI_ERR_OTHER;          \
    release_point(__builtin_return_address(0));        \
    const int rc = name args;                          \
    acquire_point(__builtin_return_address(0));        \
    return rc;                                         \
  }
PPIOS_ACQUIRE_CALLS(PPIOS_DEFINE_ACQUIRE)
#undef PPIOS_DEFINE_ACQUIRE

// ------------------------------------------------------------------ child processes
// A child process changes files where the table does not see it (Coherence::note_child).
// fork() notes it in pthread_atfork's parent handler (RuntimeLifecycle.cpp); the calls
// that make a child without running that handler note it here, before the child exists.
// The PT never makes a child.

// _Fork runs no pthread_atfork handler: the child is marked here, as the handler would.
pid_t __wrap__Fork(void) {
  if (ppios::on_pt()) {
    errno = EAGAIN;
    return -1;
  }
  ppios::Coherence::note_child();
  const pid_t pid = _Fork();
  if (pid == 0) {
    ppios::g_forked_child.store(true, std::memory_order_relaxed);
    ppios::StreamHolds::get().adopt_after_fork();
  }
  return pid;
}

pid_t __wrap_vfork(void) {
  if (ppios::on_pt()) {
    errno = EAGAIN;
    return -1;
  }
  // fork, which POSIX allows vfork to be: a wrapper's frame cannot be shared with a child
  // that returns from it while the parent waits, as vfork's must.
  return fork();
}

int __wrap_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  if (ppios::on_pt()) return EAGAIN;
  ppios::Coherence::note_child();
  return posix_spawn(pid, path, actions, attr, argv, envp);
}

int __wrap_posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                        const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  if (ppios::on_pt()) return EAGAIN;
  ppios::Coherence::note_child();
  return posix_spawnp(pid, file, actions, attr, argv, envp);
}

FILE *__wrap_popen(const char *command, const char *type) {
  if (ppios::on_pt()) {
    errno = EAGAIN;
    return nullptr;
  }
  ppios::Coherence::note_child();
  return popen(command, type);
}

pid_t __wrap_wait(int *status) {
  return reaped_child(__builtin_return_address(0), [&] { return wait(status); });
}

pid_t __wrap_waitpid(pid_t which, int *status, int options) {
  return reaped_child(__builtin_return_address(0), [&] { return waitpid(which, status, options); });
}

pid_t __wrap_wait4(pid_t which, int *status, int options, struct rusage *usage) {
  return reaped_child(__builtin_return_address(0), [&] { return wait4(which, status, options, usage); });
}

// pclose and system wait for their child themselves (glibc's own waitpid, which no
// wrapper sees): each is a reaped child when it returns one's status.
// They return the child's status (0 included), or -1 when no child was reaped.
int __wrap_pclose(FILE *stream) {
  return reaped_child(__builtin_return_address(0), [&] { return pclose(stream); },
                      [](int status) { return status != -1; });
}

int __wrap_system(const char *command) {
  if (command != nullptr && !ppios::on_pt()) ppios::Coherence::note_child();
  return reaped_child(__builtin_return_address(0), [&] { return system(command); },
                      [&](int status) { return command != nullptr && status != -1; });
}

// waitid returns 0, and a zero si_pid when WNOHANG found no child to reap.
int __wrap_waitid(idtype_t type, id_t id, siginfo_t *info, int options) {
  return reaped_child(__builtin_return_address(0), [&] {
    const int rc = waitid(type, id, info, options);
    return rc == 0 && info != nullptr ? static_cast<int>(info->si_pid) : rc;
  }) < 0 ? -1 : 0;
}

// ------------------------------------------------------------------ file locks

namespace {
// static: see Interpose.cpp (a C name inside extern "C" would be exported).
static bool takes_lock(int cmd, const void *arg) {
  switch (cmd) {
    case F_SETLK:
    case F_SETLKW:
    case F_OFD_SETLK:
    case F_OFD_SETLKW:
      return arg != nullptr && static_cast<const struct flock *>(arg)->l_type != F_UNLCK;
    default:
      return false;
  }
}

static bool process_lock(int cmd) { return cmd == F_SETLK || cmd == F_SETLKW; }

// Whatever cmd is, its third argument is passed on as glibc's fcntl takes it: as a
// pointer-sized value.
static int fcntl_any(int fd, int cmd, void *arg, const void *site) {
  if (ppios::on_pt()) {
    if (!ppios::PtResources::get().owns_fd(fd)) {
      errno = EBADF;
      return -1;
    }
    return fcntl(fd, cmd, arg);
  }
  if (ppios::pts_own(fd)) return -1;
  const bool locking = takes_lock(cmd, arg);
  if (cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW)
    release_point(site);  // an unlock lets another process in after this one's changes
  // Noted before the lock exists: a runtime close racing with it is either before the
  // lock (harmless) or deferred.
  if (locking && process_lock(cmd) && !ppios::pass_through()) ppios::PtResources::get().note_program_lock(fd);
  const int rc = fcntl(fd, cmd, arg);
  if (rc != -1 && locking) acquire_point(site);
  if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))  // a new descriptor: maybe 1 or 2
    ppios::coherence_effect(site, [&](bool entered) { ppios::fd_repointed(rc, entered); });
  return rc;
}
}  // namespace

int __wrap_fcntl(int fd, int cmd, ...) {
  va_list args;
  va_start(args, cmd);
  void *arg = va_arg(args, void *);
  va_end(args);
  return fcntl_any(fd, cmd, arg, __builtin_return_address(0));
}

int __wrap_fcntl64(int fd, int cmd, ...) {
  va_list args;
  va_start(args, cmd);
  void *arg = va_arg(args, void *);
  va_end(args);
  return fcntl_any(fd, cmd, arg, __builtin_return_address(0));
}

int __wrap_lockf(int fd, int cmd, off_t length) {
  if (ppios::on_pt()) {
    errno = EBADF;
    return -1;
  }
  if (ppios::pts_own(fd)) return -1;
  const bool locking = cmd == F_LOCK || cmd == F_TLOCK;
  if (cmd == F_ULOCK) release_point(__builtin_return_address(0));
  if (locking && !ppios::pass_through()) ppios::PtResources::get().note_program_lock(fd);
  const int rc = lockf(fd, cmd, length);
  if (rc == 0 && locking) acquire_point(__builtin_return_address(0));
  return rc;
}

int __wrap_lockf64(int fd, int cmd, off64_t length) {
  return __wrap_lockf(fd, cmd, static_cast<off_t>(length));
}

// flock() locks belong to the open file description: another descriptor's close does not
// release them, so only the acquire point matters.
int __wrap_flock(int fd, int operation) {
  if (ppios::on_pt()) {
    errno = EBADF;
    return -1;
  }
  if (ppios::pts_own(fd)) return -1;
  if (operation & LOCK_UN) release_point(__builtin_return_address(0));
  const int rc = flock(fd, operation);
  if (rc == 0 && (operation & (LOCK_SH | LOCK_EX))) acquire_point(__builtin_return_address(0));
  return rc;
}

}  // extern "C"
