/* Character-level text data: loading (and rejecting bad files), the vocabulary,
 * encoding, and random next-token windows. */
#include "harness.h"

static char tmp_path[512];

static const char *write_tmp(const char *name, const void *data, size_t n) {
    snprintf(tmp_path, sizeof tmp_path, "%s/%s", CML_TEST_TMP, name);
    FILE *f = fopen(tmp_path, "wb");
    if (!f) return NULL;
    if (n) fwrite(data, 1, n, f);
    fclose(f);
    return tmp_path;
}

static void test_load(void) {
    const char body[] = "To be, or not to be\n";
    const char *p = write_tmp("text_ok.txt", body, sizeof body - 1);
    CHECK_NOT_NULL(p);
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(cml_text_load(p, &text, &len));
    CHECK(len == sizeof body - 1);
    CHECK(text && memcmp(text, body, len) == 0 && text[len] == '\0');
    free(text);

    text = (char *)1;
    CHECK_STATUS(cml_text_load(CML_TEST_TMP "/no_such_file.txt", &text, &len), CML_ERR_IO, "no_such_file.txt");
    CHECK(text == NULL && len == 0);
    CHECK_STATUS(cml_text_load(CML_TEST_TMP, &text, &len), CML_ERR_IO, "cannot read");
    p = write_tmp("text_empty.txt", "", 0);
    CHECK_STATUS(cml_text_load(p, &text, &len), CML_ERR_CORRUPT, "empty");
    const char bin[] = {'a', 'b', '\0', 'c'};
    p = write_tmp("text_nul.bin", bin, sizeof bin);
    CHECK_STATUS(cml_text_load(p, &text, &len), CML_ERR_CORRUPT, "NUL byte at offset 2");
    CHECK_STATUS(cml_text_load(NULL, &text, &len), CML_ERR_INVALID_ARG, "must not be NULL");
}

/* A file larger than the reader's first buffer. */
static void test_load_large(void) {
    size_t n = 200000;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++) big[i] = (char)('a' + i % 26);
    const char *p = write_tmp("text_big.txt", big, n);
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(cml_text_load(p, &text, &len));
    CHECK(len == n && text && memcmp(text, big, n) == 0);
    free(text);
    free(big);
}

static void test_vocab_encode(void) {
    const char *s = "hello world\n";
    cml_char_vocab v;
    CHECK_OK(cml_char_vocab_build(&v, s, strlen(s)));
    CHECK(v.size == 9);
    CHECK(memcmp(v.chars, "\n dehlorw", 9) == 0); /* sorted bytes */
    CHECK(v.ids['\n'] == 0 && v.ids[' '] == 1 && v.ids['w'] == 8 && v.ids['z'] == -1);
    int64_t ids[12];
    CHECK_OK(cml_char_encode(&v, s, strlen(s), ids));
    for (size_t i = 0; i < strlen(s); i++) CHECK(v.chars[ids[i]] == (unsigned char)s[i]);
    CHECK(ids[0] == 4 && ids[11] == 0);
    CHECK_STATUS(cml_char_encode(&v, "held!", 5, ids), CML_ERR_INVALID_ARG, "'!' at offset 4");
    CHECK_STATUS(cml_char_encode(&v, "\x01", 1, ids), CML_ERR_INVALID_ARG, "byte 0x01");
    CHECK_STATUS(cml_char_vocab_build(&v, s, 0), CML_ERR_INVALID_ARG, "len=0");

    cml_char_vocab w;
    CHECK_OK(cml_char_vocab_from_chars(&w, v.chars, v.size));
    CHECK(w.size == v.size && memcmp(w.ids, v.ids, sizeof w.ids) == 0);
    /* Any order is kept as given (ids follow the saved order). */
    CHECK_OK(cml_char_vocab_from_chars(&w, (const unsigned char *)"zyx", 3));
    CHECK(w.ids['z'] == 0 && w.ids['x'] == 2 && w.ids['a'] == -1);
    CHECK_STATUS(cml_char_vocab_from_chars(&w, (const unsigned char *)"abca", 4), CML_ERR_INVALID_ARG, "twice");
    CHECK_STATUS(cml_char_vocab_from_chars(&w, (const unsigned char *)"a", 0), CML_ERR_INVALID_ARG, "size=0");
}

static void test_windows(void) {
    int64_t tokens[10];
    for (int i = 0; i < 10; i++) tokens[i] = 100 + i;
    cml_rng rng;
    cml_rng_init(&rng, 7);
    int64_t B = 400, T = 3;
    cml_tensor *x = NULL, *y = NULL;
    CHECK_OK(cml_token_windows(tokens, 10, B, T, &rng, &x, &y));
    CHECK(x && y && cml_tensor_ndim(x) == 2 && cml_tensor_size(x, 0) == B && cml_tensor_size(x, 1) == T);
    CHECK(cml_tensor_dtype(x) == CML_I64 && cml_tensor_dtype(y) == CML_I64);
    int counts[10] = {0};
    const int64_t *xd = cml_tensor_data(x), *yd = cml_tensor_data(y);
    for (int64_t b = 0; b < B; b++) {
        int64_t start = xd[b * T] - 100;
        CHECK(start >= 0 && start <= 10 - T - 1);
        if (start >= 0 && start < 10) counts[start]++;
        for (int64_t t = 0; t < T; t++) {
            CHECK(xd[b * T + t] == 100 + start + t);
            CHECK(yd[b * T + t] == 100 + start + t + 1);
        }
    }
    for (int s = 0; s <= 6; s++) CHECK_MSG(counts[s] > 30, "start %d drawn %d times of 400", s, counts[s]);
    CHECK(counts[7] == 0);
    cml_tensor_release_all((cml_tensor *[]){x, y}, 2);

    /* Same generator state, same windows; the generator advances. */
    cml_rng a, b;
    cml_rng_init(&a, 3);
    cml_rng_init(&b, 3);
    cml_tensor *x1, *y1, *x2, *y2;
    CHECK_OK(cml_token_windows(tokens, 10, 4, 2, &a, &x1, &y1));
    CHECK_OK(cml_token_windows(tokens, 10, 4, 2, &b, &x2, &y2));
    CHECK(memcmp(cml_tensor_data(x1), cml_tensor_data(x2), 8 * sizeof(int64_t)) == 0);
    CHECK(a.offset == b.offset && a.offset > 0);
    cml_tensor_release_all((cml_tensor *[]){x1, y1, x2, y2}, 4);

    /* n == T + 1 leaves one window. */
    CHECK_OK(cml_token_windows(tokens, 4, 2, 3, &a, &x1, &y1));
    CHECK(((int64_t *)cml_tensor_data(x1))[0] == 100 && ((int64_t *)cml_tensor_data(y1))[5] == 103);
    cml_tensor_release_all((cml_tensor *[]){x1, y1}, 2);

    CHECK_STATUS(cml_token_windows(tokens, 3, 2, 3, &a, &x1, &y1), CML_ERR_INVALID_ARG, "too short");
    CHECK(x1 == NULL && y1 == NULL);
    CHECK_STATUS(cml_token_windows(tokens, 10, 0, 3, &a, &x1, &y1), CML_ERR_INVALID_ARG, "B=0");
    CHECK_STATUS(cml_token_windows(tokens, 10, 1, 3, NULL, &x1, &y1), CML_ERR_INVALID_ARG, "must not be NULL");
}

/* The repository's copy of Tiny Shakespeare (data/ beside tests/). */
static void test_tinyshakespeare(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s", __FILE__);
    char *cut = strstr(path, "/tests/cpu/");
    if (!cut) {
        printf("  (skipped: cannot find the checkout from %s)\n", __FILE__);
        return;
    }
    snprintf(cut, sizeof path - (size_t)(cut - path), "/data/tinyshakespeare/input.txt");
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(cml_text_load(path, &text, &len));
    CHECK(len == 1115394);
    cml_char_vocab v;
    CHECK_OK(cml_char_vocab_build(&v, text, len));
    CHECK(v.size == 65);
    CHECK(text && strncmp(text, "First Citizen:", 14) == 0);
    free(text);
}

int main(void) {
    RUN(test_load);
    RUN(test_load_large);
    RUN(test_vocab_encode);
    RUN(test_windows);
    RUN(test_tinyshakespeare);
    return th_finish();
}
