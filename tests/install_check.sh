#!/usr/bin/env bash
# Installs the build into a temporary prefix and compiles and runs a program
# against it through pkg-config, with both the static and the shared library.
#   tests/install_check.sh BUILD_DIR
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig"
cat > "$prefix/hello.c" <<'C'
#include <camel/camel.h>
#include <stdio.h>
int main(void) {
    cml_tensor *a = cml_tensor_arange(0, 6, 1, CML_F32, CML_DEVICE_CPU);
    cml_tensor *b = cml_reshape(a, 2, (int64_t[]){2, 3});
    cml_tensor *s = cml_sum(b, (int[]){1}, 1, false);
    if (!s) { fprintf(stderr, "%s\n", cml_last_error()); return 1; }
    printf("camel %s: row sums %g %g\n", cml_version(), cml_tensor_item_at(s, (int64_t[]){0}),
           cml_tensor_item_at(s, (int64_t[]){1}));
    int ok = cml_tensor_item_at(s, (int64_t[]){0}) == 3 && cml_tensor_item_at(s, (int64_t[]){1}) == 12;
    cml_tensor_release(s); cml_tensor_release(b); cml_tensor_release(a);
    return ok ? 0 : 1;
}
C
cc -std=c11 "$prefix/hello.c" -o "$prefix/hello_shared" $(pkg-config --cflags --libs camel)
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib/x86_64-linux-gnu" "$prefix/hello_shared"
cc -std=c11 "$prefix/hello.c" -o "$prefix/hello_static" $(pkg-config --cflags camel) \
   "$(find "$prefix" -name libcamel.a)" $(pkg-config --libs-only-other --static camel) \
   $(pkg-config --static --libs camel | sed 's/-lcamel//')
"$prefix/hello_static"
echo "install check: ok (headers, libcamel.so, libcamel.a, camel.pc)"
