#include "simfs_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

namespace simfs {

namespace {
constexpr const char* kModelFile = "/.simfs-model.json";
constexpr const char* kStatsFile = "/.simfs-stats.json";

int negErrno() { return -errno; }

// The backing fd must not inherit flags that change I/O semantics below the model:
// O_DIRECT would demand aligned buffers for what are arbitrary FUSE requests, and the
// kernel already keeps no cache for the mount (direct_io).
int backingOpenFlags(int fuse_flags) { return (fuse_flags & ~O_DIRECT) | O_CLOEXEC; }
}  // namespace

// ---------------------------------------------------------------- RequestLog

void RequestLog::add(Counts* counts, uint64_t size) {
    counts->requests += 1;
    counts->bytes += size;
    counts->max_size = std::max(counts->max_size, size);
    auto it = counts->by_size.find(size);
    if (it != counts->by_size.end()) {
        it->second += 1;
    } else if (counts->by_size.size() < kMaxDistinctSizes) {
        counts->by_size.emplace(size, 1);
    } else {
        counts->other_sizes += 1;
    }
}

void RequestLog::record(bool is_write, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    add(is_write ? &writes_ : &reads_, size);
}

void RequestLog::reset() {
    std::lock_guard<std::mutex> lock(mu_);
    reads_ = Counts();
    writes_ = Counts();
}

void RequestLog::appendJson(std::string* out, const char* prefix, const Counts& counts) {
    std::ostringstream s;
    s << "\"" << prefix << "_requests\": " << counts.requests << ", \"" << prefix
      << "_bytes\": " << counts.bytes << ", \"" << prefix << "_max_size\": " << counts.max_size
      << ", \"" << prefix << "_other_sizes\": " << counts.other_sizes << ", \"" << prefix
      << "_sizes\": {";
    bool first = true;
    for (const auto& [size, n] : counts.by_size) {
        s << (first ? "" : ", ") << "\"" << size << "\": " << n;
        first = false;
    }
    s << "}";
    *out += s.str();
}

std::string RequestLog::toJson() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = "{";
    appendJson(&out, "read", reads_);
    out += ", ";
    appendJson(&out, "write", writes_);
    out += "}";
    return out;
}

// ---------------------------------------------------------------- SimFs

struct SimFs::OpenFile {
    enum class Kind { Backing, ModelJson, StatsJson };
    Kind kind = Kind::Backing;
    int fd = -1;
    std::string content;  // virtual files: the document as it was at open()
    bool writing = false; // .simfs-model.json opened for writing: content is what was written
};

SimFs::SimFs(int backing_dir_fd, const std::string& backing_path, DeviceModel* model,
             const SimFsOptions& options)
    : backing_fd_(backing_dir_fd),
      backing_path_(backing_path),
      model_(model),
      options_(options),
      mounted_at_([] {
          struct timespec ts;
          clock_gettime(CLOCK_REALTIME, &ts);
          return ts;
      }()) {}

SimFs* SimFs::self() { return static_cast<SimFs*>(fuse_get_context()->private_data); }

SimFs::OpenFile* SimFs::handle(fuse_file_info* fi) {
    return reinterpret_cast<OpenFile*>(static_cast<uintptr_t>(fi->fh));
}

const char* SimFs::relative(const char* path) {
    while (*path == '/') ++path;
    return *path ? path : ".";
}

bool SimFs::isModelFile(const char* path) { return path && std::strcmp(path, kModelFile) == 0; }
bool SimFs::isStatsFile(const char* path) { return path && std::strcmp(path, kStatsFile) == 0; }

std::string SimFs::modelJson() const {
    return model_->params().toJson(model_->params().defaultCurveLength()) + "\n";
}

std::string SimFs::statsJson() {
    const ModelStats m = model_->stats();
    std::ostringstream s;
    s.precision(9);
    s << "{\"backing\": \"" << backing_path_ << "\", \"model\": " << model_->params().toJson(0)
      << ", \"device\": {\"requests\": " << m.requests << ", \"bytes\": " << m.bytes
      << ", \"busy_seconds\": " << m.busy_seconds
      << ", \"max_concurrency\": " << m.max_concurrency
      << ", \"mean_late_wakeup_us\": "
      << (m.requests ? m.total_late_wakeup_seconds / m.requests * 1e6 : 0.0)
      << ", \"max_late_wakeup_us\": " << m.max_late_wakeup_seconds * 1e6
      << ", \"seconds_at_k\": [";
    for (size_t k = 1; k < m.seconds_at_k.size(); ++k)
        s << (k > 1 ? ", " : "") << m.seconds_at_k[k];
    s << "], \"mibps_at_k\": [";
    for (size_t k = 1; k < m.seconds_at_k.size(); ++k) {
        const double mibps = m.seconds_at_k[k] > 0
                                 ? m.bytes_at_k[k] / m.seconds_at_k[k] / (1024.0 * 1024.0)
                                 : 0.0;
        s << (k > 1 ? ", " : "") << mibps;
    }
    s << "]}, \"fuse\": " << requests_.toJson() << ", \"conn\": {\"max_read\": "
      << conn_max_read_ << ", \"max_write\": " << conn_max_write_
      << ", \"proto_minor\": " << conn_proto_minor_
      << ", \"requested_max_request\": " << options_.max_request_bytes
      << "}, \"workers\": {\"rt_priority\": " << options_.realtime_priority
      << ", \"sched_fifo_workers\": " << realtime_workers_.load() << "}}\n";
    return s.str();
}

// Runs once on each FUSE worker, at its first data request.
void SimFs::prepareWorkerThread() {
    thread_local bool prepared = false;
    if (prepared) return;
    prepared = true;
    // Model waits are timed condvar waits of milliseconds; the default 50 us timer slack
    // would lengthen each of them.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    if (options_.realtime_priority <= 0) return;
    // On a loaded machine a waking worker can wait milliseconds for a CPU; during that
    // time the emulated device idles, which the model never asked for. Under SCHED_FIFO
    // the wake-up preempts ordinary work. Workers only copy data and sleep, so they
    // cannot starve the programs they serve.
    sched_param param{};
    param.sched_priority = options_.realtime_priority;
    const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
    if (rc == 0) {
        realtime_workers_.fetch_add(1);
    } else if (!realtime_warned_.exchange(true)) {
        std::fprintf(stderr,
                     "ppios-simfs: cannot run workers under SCHED_FIFO (%s); model timing "
                     "will include CPU scheduling delays\n",
                     std::strerror(rc));
    }
}

int SimFs::virtualGetattr(const char* path, struct stat* st) {
    std::memset(st, 0, sizeof(*st));
    const bool stats = isStatsFile(path);
    st->st_mode = S_IFREG | 0644;
    st->st_nlink = 1;
    st->st_uid = getuid();
    st->st_gid = getgid();
    st->st_size = static_cast<off_t>(stats ? statsJson().size() : modelJson().size());
    st->st_mtim = st->st_ctim = st->st_atim = mounted_at_;
    return 0;
}

int SimFs::modeledRead(int fd, char* buf, size_t size, off_t offset) {
    prepareWorkerThread();
    requests_.record(false, size);
    // Charge only the bytes that exist: a read that crosses EOF transfers less.
    struct stat st;
    if (fstat(fd, &st) != 0) return negErrno();
    const uint64_t available =
        st.st_size > offset ? static_cast<uint64_t>(st.st_size - offset) : 0;
    DeviceModel::Request request;
    model_->admit(&request, std::min<uint64_t>(size, available));
    size_t done = 0;
    int result = 0;
    while (done < size) {
        const ssize_t n = pread(fd, buf + done, size - done, offset + done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { result = negErrno(); break; }
        if (n == 0) break;
        done += static_cast<size_t>(n);
    }
    model_->await(&request);
    return result < 0 ? result : static_cast<int>(done);
}

int SimFs::modeledWrite(int fd, const char* buf, size_t size, off_t offset) {
    prepareWorkerThread();
    requests_.record(true, size);
    DeviceModel::Request request;
    model_->admit(&request, size);
    size_t done = 0;
    int result = 0;
    while (done < size) {
        const ssize_t n = pwrite(fd, buf + done, size - done, offset + done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { result = negErrno(); break; }
        done += static_cast<size_t>(n);
    }
    model_->await(&request);
    return result < 0 && done == 0 ? result : static_cast<int>(done);
}

// ---------------------------------------------------------------- operations

void* SimFs::opInit(fuse_conn_info* conn, fuse_config* cfg) {
    SimFs* fs = self();
    // Every read must reach the model: no page cache, no readahead (TOOLCHAIN.md).
    cfg->direct_io = 1;
    cfg->kernel_cache = 0;
    cfg->auto_cache = 0;
    // Files may change in the backing directory behind the mount (inputs generated
    // there); do not let the kernel trust stale sizes or names.
    cfg->entry_timeout = 0;
    cfg->attr_timeout = 0;
    cfg->negative_timeout = 0;
    // Operations on open files use their fd, so unlink can remove immediately instead of
    // leaving .fuse_hidden files in the backing directory.
    cfg->nullpath_ok = 1;
    cfg->hard_remove = 1;
    cfg->use_ino = 1;
    conn->max_readahead = 0;
    // Large application reads are split into requests of at most max_read (reads) and
    // max_write (writes); the kernel also caps both at max_pages (1 MiB).
    conn->max_read = fs->options_.max_request_bytes;
    conn->max_write = std::min(conn->max_write, fs->options_.max_request_bytes);
    fs->conn_max_read_ = conn->max_read;
    fs->conn_max_write_ = conn->max_write;
    fs->conn_proto_minor_ = conn->proto_minor;
    return fs;
}

int SimFs::opGetattr(const char* path, struct stat* st, fuse_file_info* fi) {
    SimFs* fs = self();
    if (fi) {
        OpenFile* of = handle(fi);
        if (of->kind != OpenFile::Kind::Backing)
            return fs->virtualGetattr(of->kind == OpenFile::Kind::StatsJson ? kStatsFile
                                                                            : kModelFile,
                                      st);
        return fstat(of->fd, st) == 0 ? 0 : negErrno();
    }
    if (isModelFile(path) || isStatsFile(path)) return fs->virtualGetattr(path, st);
    return fstatat(fs->backing_fd_, relative(path), st, AT_SYMLINK_NOFOLLOW) == 0 ? 0
                                                                                 : negErrno();
}

int SimFs::opReadlink(const char* path, char* buf, size_t size) {
    const ssize_t n = readlinkat(self()->backing_fd_, relative(path), buf, size - 1);
    if (n < 0) return negErrno();
    buf[n] = '\0';
    return 0;
}

int SimFs::opMkdir(const char* path, mode_t mode) {
    return mkdirat(self()->backing_fd_, relative(path), mode) == 0 ? 0 : negErrno();
}

int SimFs::opUnlink(const char* path) {
    if (isModelFile(path) || isStatsFile(path)) return -EPERM;
    return unlinkat(self()->backing_fd_, relative(path), 0) == 0 ? 0 : negErrno();
}

int SimFs::opRmdir(const char* path) {
    return unlinkat(self()->backing_fd_, relative(path), AT_REMOVEDIR) == 0 ? 0 : negErrno();
}

int SimFs::opSymlink(const char* target, const char* path) {
    return symlinkat(target, self()->backing_fd_, relative(path)) == 0 ? 0 : negErrno();
}

int SimFs::opRename(const char* from, const char* to, unsigned int flags) {
    if (isModelFile(from) || isStatsFile(from) || isModelFile(to) || isStatsFile(to))
        return -EPERM;
    const int fd = self()->backing_fd_;
    return renameat2(fd, relative(from), fd, relative(to), flags) == 0 ? 0 : negErrno();
}

int SimFs::opLink(const char* from, const char* to) {
    const int fd = self()->backing_fd_;
    return linkat(fd, relative(from), fd, relative(to), 0) == 0 ? 0 : negErrno();
}

int SimFs::opChmod(const char* path, mode_t mode, fuse_file_info* fi) {
    if (fi && handle(fi)->kind == OpenFile::Kind::Backing)
        return fchmod(handle(fi)->fd, mode) == 0 ? 0 : negErrno();
    if (isModelFile(path) || isStatsFile(path)) return -EPERM;
    return fchmodat(self()->backing_fd_, relative(path), mode, 0) == 0 ? 0 : negErrno();
}

int SimFs::opChown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi) {
    if (fi && handle(fi)->kind == OpenFile::Kind::Backing)
        return fchown(handle(fi)->fd, uid, gid) == 0 ? 0 : negErrno();
    if (isModelFile(path) || isStatsFile(path)) return -EPERM;
    return fchownat(self()->backing_fd_, relative(path), uid, gid, AT_SYMLINK_NOFOLLOW) == 0
               ? 0
               : negErrno();
}

int SimFs::opTruncate(const char* path, off_t size, fuse_file_info* fi) {
    SimFs* fs = self();
    const bool stats = fi ? handle(fi)->kind == OpenFile::Kind::StatsJson : isStatsFile(path);
    if (stats) {
        // Truncating the stats file is the documented way to reset the counters.
        if (size != 0) return -EINVAL;
        fs->model_->resetStats();
        fs->requests_.reset();
        return 0;
    }
    if (fi ? handle(fi)->kind == OpenFile::Kind::ModelJson : isModelFile(path)) {
        // `echo ... > .simfs-model.json`: the new model replaces the old one at close.
        if (size != 0) return -EINVAL;
        if (fi) handle(fi)->content.clear();
        return 0;
    }
    if (fi) return ftruncate(handle(fi)->fd, size) == 0 ? 0 : negErrno();
    const int fd = openat(fs->backing_fd_, relative(path), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return negErrno();
    const int result = ftruncate(fd, size) == 0 ? 0 : negErrno();
    close(fd);
    return result;
}

int SimFs::opOpen(const char* path, fuse_file_info* fi) {
    SimFs* fs = self();
    auto of = std::make_unique<OpenFile>();
    if (isModelFile(path) || isStatsFile(path)) {
        const bool stats = isStatsFile(path);
        of->kind = stats ? OpenFile::Kind::StatsJson : OpenFile::Kind::ModelJson;
        of->writing = !stats && (fi->flags & O_ACCMODE) != O_RDONLY;
        if (stats && (fi->flags & O_TRUNC)) {
            fs->model_->resetStats();
            fs->requests_.reset();
        }
        if (!of->writing) of->content = stats ? fs->statsJson() : fs->modelJson();
    } else {
        of->fd = openat(fs->backing_fd_, relative(path), backingOpenFlags(fi->flags));
        if (of->fd < 0) return negErrno();
    }
    fi->direct_io = 1;
    fi->keep_cache = 0;
    fi->fh = reinterpret_cast<uintptr_t>(of.release());
    return 0;
}

int SimFs::opCreate(const char* path, mode_t mode, fuse_file_info* fi) {
    if (isModelFile(path) || isStatsFile(path)) return -EEXIST;
    auto of = std::make_unique<OpenFile>();
    of->fd = openat(self()->backing_fd_, relative(path), backingOpenFlags(fi->flags) | O_CREAT,
                    mode);
    if (of->fd < 0) return negErrno();
    fi->direct_io = 1;
    fi->keep_cache = 0;
    fi->fh = reinterpret_cast<uintptr_t>(of.release());
    return 0;
}

int SimFs::opRead(const char*, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
    OpenFile* of = handle(fi);
    if (of->kind == OpenFile::Kind::Backing) return self()->modeledRead(of->fd, buf, size, offset);
    if (offset < 0 || static_cast<size_t>(offset) >= of->content.size()) return 0;
    const size_t n = std::min(size, of->content.size() - static_cast<size_t>(offset));
    std::memcpy(buf, of->content.data() + offset, n);
    return static_cast<int>(n);
}

int SimFs::opWrite(const char*, const char* buf, size_t size, off_t offset,
                   fuse_file_info* fi) {
    OpenFile* of = handle(fi);
    if (of->kind == OpenFile::Kind::StatsJson) return static_cast<int>(size);  // ignored
    if (of->kind == OpenFile::Kind::ModelJson) {
        if (!of->writing || offset < 0 || offset > (1 << 16)) return -EINVAL;
        const size_t end = static_cast<size_t>(offset) + size;
        if (of->content.size() < end) of->content.resize(end, ' ');
        of->content.replace(static_cast<size_t>(offset), size, buf, size);
        return static_cast<int>(size);
    }
    return self()->modeledWrite(of->fd, buf, size, offset);
}

int SimFs::opStatfs(const char*, struct statvfs* st) {
    return fstatvfs(self()->backing_fd_, st) == 0 ? 0 : negErrno();
}

// A write to .simfs-model.json takes effect when the writer closes it (flush runs in
// close(), so a bad document fails the close with EINVAL and the model is unchanged).
int SimFs::opFlush(const char*, fuse_file_info* fi) {
    OpenFile* of = handle(fi);
    if (of->kind != OpenFile::Kind::ModelJson || !of->writing || of->content.empty()) return 0;
    SimFs* fs = self();
    ModelParams params = fs->model_->params();
    const std::string problem = mergeModelJson(of->content, &params);
    of->content.clear();
    if (!problem.empty()) {
        std::fprintf(stderr, "ppios-simfs: .simfs-model.json not changed: %s\n", problem.c_str());
        return -EINVAL;
    }
    fs->model_->setParams(params);
    std::fprintf(stderr, "ppios-simfs: model changed: %s\n", params.toJson(0).c_str());
    return 0;
}

int SimFs::opRelease(const char*, fuse_file_info* fi) {
    OpenFile* of = handle(fi);
    if (of->fd >= 0) close(of->fd);
    delete of;
    return 0;
}

int SimFs::opFsync(const char*, int datasync, fuse_file_info* fi) {
    OpenFile* of = handle(fi);
    if (of->fd < 0) return 0;
    const int rc = datasync ? fdatasync(of->fd) : fsync(of->fd);
    return rc == 0 ? 0 : negErrno();
}

int SimFs::opOpendir(const char* path, fuse_file_info* fi) {
    const int fd = openat(self()->backing_fd_, relative(path),
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return negErrno();
    DIR* dir = fdopendir(fd);
    if (!dir) {
        const int err = negErrno();
        close(fd);
        return err;
    }
    fi->fh = reinterpret_cast<uintptr_t>(dir);
    return 0;
}

int SimFs::opReaddir(const char*, void* buf, fuse_fill_dir_t filler, off_t,
                     fuse_file_info* fi, fuse_readdir_flags) {
    // Offsets are not used (every call lists the whole directory into libfuse's buffer),
    // so a rewinddir by the application arrives here as a fresh listing.
    DIR* dir = reinterpret_cast<DIR*>(static_cast<uintptr_t>(fi->fh));
    rewinddir(dir);
    errno = 0;
    while (struct dirent* entry = readdir(dir)) {
        struct stat st;
        std::memset(&st, 0, sizeof(st));
        st.st_ino = entry->d_ino;
        st.st_mode = static_cast<mode_t>(DTTOIF(entry->d_type));
        if (filler(buf, entry->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0))) break;
    }
    return errno ? negErrno() : 0;
}

int SimFs::opReleasedir(const char*, fuse_file_info* fi) {
    closedir(reinterpret_cast<DIR*>(static_cast<uintptr_t>(fi->fh)));
    return 0;
}

int SimFs::opAccess(const char* path, int mask) {
    if (isModelFile(path)) return (mask & W_OK) ? -EACCES : 0;
    if (isStatsFile(path)) return 0;
    return faccessat(self()->backing_fd_, relative(path), mask, 0) == 0 ? 0 : negErrno();
}

int SimFs::opUtimens(const char* path, const struct timespec tv[2], fuse_file_info* fi) {
    if (fi && handle(fi)->kind == OpenFile::Kind::Backing)
        return futimens(handle(fi)->fd, tv) == 0 ? 0 : negErrno();
    if (isModelFile(path) || isStatsFile(path)) return 0;
    return utimensat(self()->backing_fd_, relative(path), tv, AT_SYMLINK_NOFOLLOW) == 0
               ? 0
               : negErrno();
}

int SimFs::opFallocate(const char*, int mode, off_t offset, off_t length, fuse_file_info* fi) {
    OpenFile* of = handle(fi);
    if (of->fd < 0) return -EOPNOTSUPP;
    return fallocate(of->fd, mode, offset, length) == 0 ? 0 : negErrno();
}

const fuse_operations& SimFs::operations() {
    static const fuse_operations ops = [] {
        fuse_operations o;
        std::memset(&o, 0, sizeof(o));
        o.init = opInit;
        o.getattr = opGetattr;
        o.readlink = opReadlink;
        o.mkdir = opMkdir;
        o.unlink = opUnlink;
        o.rmdir = opRmdir;
        o.symlink = opSymlink;
        o.rename = opRename;
        o.link = opLink;
        o.chmod = opChmod;
        o.chown = opChown;
        o.truncate = opTruncate;
        o.open = opOpen;
        o.create = opCreate;
        o.read = opRead;
        o.write = opWrite;
        o.statfs = opStatfs;
        o.flush = opFlush;
        o.release = opRelease;
        o.fsync = opFsync;
        o.opendir = opOpendir;
        o.readdir = opReaddir;
        o.releasedir = opReleasedir;
        o.access = opAccess;
        o.utimens = opUtimens;
        o.fallocate = opFallocate;
        return o;
    }();
    return ops;
}

}  // namespace simfs
