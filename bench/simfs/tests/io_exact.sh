# simfs.io_exact: reads through the mount return exactly the backing file's bytes, for
# several sizes, offsets and reads that cross or start past EOF; large reads are split
# into max_read requests, with and without the model.
SIMFS=$1 CALIBRATE=$2
source "$(dirname "$0")/lib.sh"
require_fuse

sizes=(0 1 4095 4096 4097 131072 1048575 1048577 3145851)
for size in "${sizes[@]}"; do
    head -c "$size" /dev/urandom >"$BACKING/f$size"
done

check_reads() {
    local label=$1
    for size in "${sizes[@]}"; do
        cmp "$BACKING/f$size" "$MNT/f$size" || fail "$label: f$size differs (whole file)"
        # One large read (split by the kernel), then ranges around block boundaries and EOF.
        dd if="$MNT/f$size" bs=4M status=none | cmp - "$BACKING/f$size" ||
            fail "$label: f$size differs with 4 MiB reads"
        for spec in "0 1" "1 4096" "4095 2" "4096 1000000" "1048575 3" "$((size - 1)) 10" \
                    "$((size / 2)) $size" "$size 100" "$((size + 5000)) 10"; do
            read -r off len <<<"$spec"
            ((off >= 0)) || continue
            a=$(dd if="$MNT/f$size" iflag=skip_bytes,count_bytes skip="$off" count="$len" \
                bs=1M status=none | md5sum)
            b=$(dd if="$BACKING/f$size" iflag=skip_bytes,count_bytes skip="$off" count="$len" \
                bs=1M status=none | md5sum)
            [[ $a == "$b" ]] || fail "$label: f$size differs at offset $off length $len"
        done
    done
    pass "$label: ${#sizes[@]} files, whole and ranged reads identical"
}

# Fast model: the data path is the modeled one, the test stays quick.
mount_simfs --peak-mibps 4000 --optimal-streams 2
: >"$MNT/.simfs-stats.json"
check_reads "model"
# The kernel must not have cached anything: every byte read went through the model.
[[ $(stat_field "d['device']['requests'] == d['fuse']['read_requests']") == True ]] ||
    fail "model saw a different number of requests than FUSE"
max=$(stat_field "d['fuse']['read_max_size']")
[[ $max == 1048576 ]] || fail "largest read request was $max bytes, expected 1048576"
pass "large reads arrive as 1 MiB requests: $(stat_field "d['fuse']['read_sizes']")"
# Reading the same file twice must cost twice: no page cache on the mount.
: >"$MNT/.simfs-stats.json"
cat "$MNT/f3145851" "$MNT/f3145851" >/dev/null
bytes=$(stat_field "d['device']['bytes']")
[[ $bytes == $((2 * 3145851)) ]] || fail "two reads of 3145851 bytes charged $bytes bytes"
pass "repeated read charged twice ($bytes bytes): no kernel caching"
unmount_simfs

mount_simfs --no-model
check_reads "no-model"
unmount_simfs
