# Shared pieces of the one-call A/B scripts (dev/*/run_s1*.sh): source it from the repository root.

# ab_trees W BASE PATCH: copies of this tree without .git and build dirs in W (new) and BASE; the patch applied to W,
# or, where this tree already has it, reverted in BASE (git apply works on a plain directory outside any repository).
# Prints what it did; returns 1 when the patch neither applies nor reverts.
ab_trees() {
    local w=$1 base=$2 patch=$3
    rm -rf "$w" "$base" && mkdir -p "$w" "$base"
    tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C "$w"
    tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C "$base"
    if (cd "$w" && git apply --check "$patch" 2>/dev/null); then
        (cd "$w" && git apply "$patch") && echo "$(basename "$patch") applied to $w"
    elif (cd "$base" && git apply -R --check "$patch" 2>/dev/null); then
        (cd "$base" && git apply -R "$patch") && echo "tree already has $(basename "$patch"): reverted in $base"
    else
        echo "$(basename "$patch") neither applies nor reverts: stop"
        return 1
    fi
}
