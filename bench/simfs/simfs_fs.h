// SimFs: the FUSE operations of ppios-simfs. Mirrors a backing directory and sends every
// read and write of file data through one shared DeviceModel; metadata operations
// (stat, readdir, rename, ...) pass straight through, unmodeled.
//
// Two virtual files exist at the root, not listed by readdir so tools that walk the tree
// do not pick them up:
//   .simfs-model.json  the model parameters and B(k) (for result files); writing JSON
//                      with some of the parameters changes the device live (at close)
//   .simfs-stats.json  the model's own accounting and the FUSE request sizes seen;
//                      truncating it (`: > MNT/.simfs-stats.json`) resets the counters.
//
// Locks: DeviceModel::mu_ and RequestLog::mu_ are independent; no code holds both.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse3/fuse.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "device_model.h"

namespace simfs {

// Counts FUSE read/write requests by size, to show how the kernel splits application
// reads (max_read, max_pages) before they reach the model.
class RequestLog {
public:
    void record(bool is_write, uint64_t size);
    void reset();
    // JSON object: {"read_requests": n, "read_sizes": {"size": count, ...}, ...}
    std::string toJson();

private:
    // Distinct sizes are few (the split size plus tails); cap them so a random-size
    // workload cannot grow the map without bound.
    static constexpr size_t kMaxDistinctSizes = 64;
    struct Counts {
        uint64_t requests = 0;
        uint64_t bytes = 0;
        uint64_t max_size = 0;
        uint64_t other_sizes = 0;  // requests whose size did not fit in by_size
        std::map<uint64_t, uint64_t> by_size;
    };
    void add(Counts* counts, uint64_t size);
    static void appendJson(std::string* out, const char* prefix, const Counts& counts);

    std::mutex mu_;
    Counts reads_;
    Counts writes_;
};

struct SimFsOptions {
    unsigned max_request_bytes = 1024 * 1024;  // asked of the kernel for max_read/max_write
    int realtime_priority = 10;  // SCHED_FIFO priority of FUSE workers; 0: ordinary scheduling
};

class SimFs {
public:
    SimFs(int backing_dir_fd, const std::string& backing_path, DeviceModel* model,
          const SimFsOptions& options);

    // The operation table for fuse_new(); private_data must be this SimFs.
    static const fuse_operations& operations();

    // JSON documents served by the virtual files.
    std::string modelJson() const;
    std::string statsJson();

private:
    struct OpenFile;
    static SimFs* self();
    static OpenFile* handle(fuse_file_info* fi);

    // Path inside the backing directory for a FUSE path ("/a/b" -> "a/b", "/" -> ".").
    static const char* relative(const char* path);
    static bool isModelFile(const char* path);
    static bool isStatsFile(const char* path);
    int virtualGetattr(const char* path, struct stat* st);
    void prepareWorkerThread();
    // Real I/O on the backing fd with the model's delay around it.
    int modeledRead(int fd, char* buf, size_t size, off_t offset);
    int modeledWrite(int fd, const char* buf, size_t size, off_t offset);

    static void* opInit(fuse_conn_info* conn, fuse_config* cfg);
    static int opGetattr(const char* path, struct stat* st, fuse_file_info* fi);
    static int opReadlink(const char* path, char* buf, size_t size);
    static int opMkdir(const char* path, mode_t mode);
    static int opUnlink(const char* path);
    static int opRmdir(const char* path);
    static int opSymlink(const char* target, const char* path);
    static int opRename(const char* from, const char* to, unsigned int flags);
    static int opLink(const char* from, const char* to);
    static int opChmod(const char* path, mode_t mode, fuse_file_info* fi);
    static int opChown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi);
    static int opTruncate(const char* path, off_t size, fuse_file_info* fi);
    static int opOpen(const char* path, fuse_file_info* fi);
    static int opCreate(const char* path, mode_t mode, fuse_file_info* fi);
    static int opRead(const char* path, char* buf, size_t size, off_t offset,
                      fuse_file_info* fi);
    static int opWrite(const char* path, const char* buf, size_t size, off_t offset,
                       fuse_file_info* fi);
    static int opStatfs(const char* path, struct statvfs* st);
    static int opFlush(const char* path, fuse_file_info* fi);
    static int opRelease(const char* path, fuse_file_info* fi);
    static int opFsync(const char* path, int datasync, fuse_file_info* fi);
    static int opOpendir(const char* path, fuse_file_info* fi);
    static int opReaddir(const char* path, void* buf, fuse_fill_dir_t filler, off_t offset,
                         fuse_file_info* fi, fuse_readdir_flags flags);
    static int opReleasedir(const char* path, fuse_file_info* fi);
    static int opAccess(const char* path, int mask);
    static int opUtimens(const char* path, const struct timespec tv[2], fuse_file_info* fi);
    static int opFallocate(const char* path, int mode, off_t offset, off_t length,
                           fuse_file_info* fi);

    const int backing_fd_;
    const std::string backing_path_;
    DeviceModel* const model_;
    const SimFsOptions options_;
    const struct timespec mounted_at_;
    RequestLog requests_;
    std::atomic<int> realtime_workers_{0};
    std::atomic<bool> realtime_warned_{false};

    // What the kernel agreed to in INIT, reported in the stats file.
    unsigned conn_max_read_ = 0;
    unsigned conn_max_write_ = 0;
    unsigned conn_proto_minor_ = 0;
};

}  // namespace simfs
