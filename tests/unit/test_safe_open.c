/*
 * test_safe_open.c -- codegen/safe_open.c: what fg_open_beneath opens and
 * refuses beneath an opened directory (nested paths, "." and doubled
 * slashes; absolute paths, "..", symbolic links at the end or on the way,
 * FIFOs, directories, missing files), fg_open_beside, and fg_read_fd's
 * size limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safe_open.h"
#include "testutil.h"

/* Opens rel beneath dirfd with flags; expects success and the text. */
static void opens(int dirfd, const char *rel, int flags, const char *text)
{
    char why[300] = "";
    uint64_t size = 0;
    int fd = fg_open_beneath(dirfd, rel, flags, &size, why, sizeof why);
    if (fd < 0)
        fail_msg("'%s' was refused: %s", rel, why);
    size_t len;
    char *got = fg_read_fd(fd, 1 << 20, &len, why, sizeof why);
    close(fd);
    assert_non_null(got);
    assert_int_equal(size, strlen(text));
    assert_string_equal(got, text);
    free(got);
}

/* Expects fg_open_beneath to refuse rel with a reason containing needle. */
static void refused(int dirfd, const char *rel, int flags, const char *needle)
{
    char why[300] = "";
    int fd = fg_open_beneath(dirfd, rel, flags, NULL, why, sizeof why);
    if (fd >= 0) {
        close(fd);
        fail_msg("'%s' was opened", rel);
    }
    if (!strstr(why, needle))
        fail_msg("'%s': reason '%s' lacks '%s'", rel, why, needle);
}

static void test_beneath(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *out = tu_tmpdir();
    char *sub = fg_path_join(dir, "sub");
    assert_int_equal(mkdir(sub, 0700), 0);
    free(tu_write(dir, "a.txt", "a"));
    free(tu_write(sub, "b.txt", "bb"));
    char *secret = tu_write(out, "s.txt", "secret");
    char *l1 = fg_path_join(dir, "l.txt"), *l2 = fg_path_join(dir, "ldir"), *l3 = fg_path_join(dir, "in.txt");
    assert_int_equal(symlink(secret, l1), 0);
    assert_int_equal(symlink(out, l2), 0);
    assert_int_equal(symlink("a.txt", l3), 0);   /* a link that stays inside: refused all the same */
    char *fifo = fg_path_join(dir, "f.txt");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char why[300];
    int dfd = fg_dir_open(dir, why, sizeof why);
    assert_true(dfd >= 0);

    opens(dfd, "a.txt", FG_OPEN_NOFOLLOW, "a");
    opens(dfd, "sub/b.txt", FG_OPEN_NOFOLLOW, "bb");
    opens(dfd, "./sub//b.txt", FG_OPEN_NOFOLLOW, "bb");
    refused(dfd, "../x", FG_OPEN_NOFOLLOW, "has a '..' component");
    refused(dfd, "sub/../a.txt", FG_OPEN_NOFOLLOW, "has a '..' component");
    refused(dfd, secret, FG_OPEN_NOFOLLOW, "is an absolute path");
    refused(dfd, "l.txt", FG_OPEN_NOFOLLOW, "is a symbolic link");
    refused(dfd, "in.txt", FG_OPEN_NOFOLLOW, "is a symbolic link");
    refused(dfd, "ldir/s.txt", FG_OPEN_NOFOLLOW, "passes through the symbolic link 'ldir'");
    refused(dfd, "f.txt", FG_OPEN_NOFOLLOW, "not a regular file (a FIFO)");
    refused(dfd, "sub", FG_OPEN_NOFOLLOW, "not a regular file (a directory)");
    refused(dfd, "sub/", FG_OPEN_NOFOLLOW, "names a directory");
    refused(dfd, "", FG_OPEN_NOFOLLOW, "is an empty path");
    refused(dfd, "none.txt", FG_OPEN_NOFOLLOW, "No such file");
    refused(dfd, "a.txt/x", FG_OPEN_NOFOLLOW, "a.txt: Not a directory");
    /* without the flag: as named, links followed; a FIFO still refused */
    opens(dfd, "l.txt", 0, "secret");
    refused(dfd, "f.txt", 0, "not a regular file (a FIFO)");

    /* fg_open_beside: the file and its directory, which stays open */
    char *a = fg_path_join(dir, "a.txt");
    int pfd, fd = fg_open_beside(a, &pfd, NULL, why, sizeof why);
    assert_true(fd >= 0 && pfd >= 0);
    close(fd);
    opens(pfd, "sub/b.txt", FG_OPEN_NOFOLLOW, "bb");
    close(pfd);
    char *missing = fg_path_join(dir, "nodir/a.txt");
    assert_int_equal(fg_open_beside(missing, &pfd, NULL, why, sizeof why), -1);
    assert_int_equal(pfd, -1);
    assert_non_null(strstr(why, "No such file"));

    /* fg_read_fd: a file over the limit is refused */
    fd = fg_open_beneath(dfd, "sub/b.txt", FG_OPEN_NOFOLLOW, NULL, why, sizeof why);
    assert_true(fd >= 0);
    size_t len;
    assert_null(fg_read_fd(fd, 1, &len, why, sizeof why));
    assert_int_equal(errno, EFBIG);
    assert_non_null(strstr(why, "more than the 1 bytes limit"));
    close(fd);

    close(dfd);
    free(a), free(missing), free(sub), free(secret), free(l1), free(l2), free(l3), free(fifo);
    tu_rmtree(dir), tu_rmtree(out);
    free(dir), free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_beneath),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
