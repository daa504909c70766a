# Sourced by the device scripts (scripts/device_*.sh): check_carry DIR says whether DIR and the
# tracked files fit the 64 MiB a device call carries, and exits 1 when they do not.
LIMIT_BYTES=$((64 * 1024 * 1024))

check_carry() {
    local dir=$1 carry repo
    carry=$(du -sb "$dir" | cut -f1)
    repo=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    echo "carry $dir: $((carry / 1024)) KiB; tracked files $((repo / 1024)) KiB;" \
         "together $(((carry + repo) / 1024)) of $((LIMIT_BYTES / 1024)) KiB"
    if ((carry + repo > LIMIT_BYTES)); then
        echo "over the 64 MiB a device call carries: leave untracked files out" >&2
        exit 1
    fi
}
