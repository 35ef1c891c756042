# simfs.writes_and_metadata: writes land in the backing directory byte for byte and go
# through the model; create, append, truncate, mkdir, rename, symlink, unlink and readdir
# behave; the virtual files are read-only / resettable and hidden from readdir.
SIMFS=$1 CALIBRATE=$2
source "$(dirname "$0")/lib.sh"
require_fuse

head -c 3145851 /dev/urandom >"$TEST_DIR/src"
mount_simfs --peak-mibps 4000 --optimal-streams 2
: >"$MNT/.simfs-stats.json"

# Large writes (split into max_write requests) and small ones.
dd if="$TEST_DIR/src" of="$MNT/out.bin" bs=4M status=none
cmp "$TEST_DIR/src" "$BACKING/out.bin" || fail "written file differs in the backing dir"
[[ $(stat_field "d['fuse']['write_bytes']") == 3145851 ]] || fail "write bytes not counted"
[[ $(stat_field "d['device']['bytes']") == 3145851 ]] || fail "writes did not go through the model"
pass "3 MiB written through the mount, identical in backing dir; write sizes: $(stat_field "d['fuse']['write_sizes']")"

printf 'hello\n' >"$MNT/small.txt"
printf 'world\n' >>"$MNT/small.txt"
[[ $(cat "$BACKING/small.txt") == $'hello\nworld' ]] || fail "append"
[[ $(stat -c %s "$MNT/small.txt") == 12 ]] || fail "size after append"
truncate -s 5 "$MNT/small.txt"
[[ $(cat "$BACKING/small.txt") == hello ]] || fail "truncate"
# Overwrite in the middle of a file (pwrite at an offset).
printf 'XY' | dd of="$MNT/small.txt" bs=1 seek=1 conv=notrunc status=none
[[ $(cat "$MNT/small.txt") == hXYlo ]] || fail "overwrite at offset"
pass "append, truncate, overwrite at offset"

mkdir -p "$MNT/dir/sub"
[[ -d $BACKING/dir/sub ]] || fail "mkdir"
mv "$MNT/small.txt" "$MNT/dir/sub/moved.txt"
[[ -f $BACKING/dir/sub/moved.txt && ! -e $BACKING/small.txt ]] || fail "rename"
ln -s moved.txt "$MNT/dir/sub/link"
[[ $(readlink "$MNT/dir/sub/link") == moved.txt && $(cat "$MNT/dir/sub/link") == hXYlo ]] ||
    fail "symlink"
chmod 600 "$MNT/dir/sub/moved.txt"
[[ $(stat -c %a "$BACKING/dir/sub/moved.txt") == 600 ]] || fail "chmod"
touch -d '2001-02-03 04:05:06' "$MNT/dir/sub/moved.txt"
[[ $(stat -c %Y "$BACKING/dir/sub/moved.txt") == $(date -d '2001-02-03 04:05:06' +%s) ]] ||
    fail "utimens"
[[ $(ls "$MNT/dir/sub" | tr '\n' ' ') == "link moved.txt " ]] || fail "readdir: $(ls "$MNT/dir/sub")"
rm "$MNT/dir/sub/link" "$MNT/dir/sub/moved.txt"
rmdir "$MNT/dir/sub" "$MNT/dir"
[[ ! -e $BACKING/dir ]] || fail "unlink/rmdir"
# A file created in the backing directory behind the mount is visible at once.
printf 'late\n' >"$BACKING/late.txt"
[[ $(cat "$MNT/late.txt") == late ]] || fail "file created in backing dir not visible"
pass "mkdir, rename, symlink, chmod, utimens, readdir, unlink, rmdir, backing-side changes"

# Virtual files.
ls -A "$MNT" | grep -q simfs && fail "virtual files must not be listed by readdir"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$MNT/.simfs-model.json" ||
    fail "model file is not JSON"
# Writing the model file changes the device (model_live_change.sh); a document that is
# not a model is refused when the writer closes it, and nothing changes.
before=$(cat "$MNT/.simfs-model.json")
model_write_refused 'x' || fail "a bad model document was accepted"
[[ $(cat "$MNT/.simfs-model.json") == "$before" ]] || fail "a refused write changed the model"
: >"$MNT/.simfs-stats.json"
[[ $(stat_field "d['device']['bytes'] + d['fuse']['read_requests']") == 0 ]] ||
    fail "truncating the stats file did not reset it"
pass "virtual files: hidden, JSON, bad model writes refused, resettable stats"
unmount_simfs
[[ -f $BACKING/out.bin && ! -e $BACKING/.simfs-stats.json ]] || fail "backing dir after unmount"
