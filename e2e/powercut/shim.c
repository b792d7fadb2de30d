/*
 * powercut shim: remembers what fsync made durable, so a test can cut the power afterwards.
 *
 * Loaded with LD_PRELOAD into a `doemu dev` process (see e2e/powercut/__init__.py). Every call
 * of fsync() or fdatasync() on a file or directory under $POWERCUT_ROOT first copies what that
 * call makes durable into $POWERCUT_SHADOW, then runs the real call:
 *
 *   - a regular file: its whole content, as "f<key>" (the file's identity, not its name: a
 *     rename does not change what was synced);
 *   - a directory: the names it holds and the identity of each, as "d<key>" ("droot" for
 *     $POWERCUT_ROOT itself): the entries a directory fsync makes durable; a new or renamed
 *     file is only reachable through them.
 *
 * <key> is the inode number plus, where the file system reports it, the birth time, so an inode
 * number reused by a later file never inherits an earlier file's content.
 *
 * The content is copied as it is when the call begins: whatever is written after that is not
 * counted as covered by this call. Every call is also appended to "log" (the test checks that
 * syncs were seen at all). sync(), syncfs() and sync_file_range() are not modelled; they are
 * logged as "unmodelled" so a test can refuse a run that used them.
 *
 * Calls are serialised by one lock (doemu fsyncs from a pool of threads).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const char *env_dir(const char *name) {
    const char *value = getenv(name);
    return value != NULL && value[0] == '/' ? value : NULL;
}

/* The identity of a file: inode number, and birth time where the file system keeps one. */
static int identity(int dirfd, const char *name, int flags, char *out, size_t size, int *is_dir) {
    struct statx st;
    if (statx(dirfd, name, flags, STATX_INO | STATX_TYPE | STATX_BTIME, &st) != 0) return -1;
    *is_dir = S_ISDIR(st.stx_mode) ? 1 : S_ISREG(st.stx_mode) ? 0 : -1;
    if (st.stx_mask & STATX_BTIME)
        snprintf(out, size, "%llu-%lld.%09u", (unsigned long long)st.stx_ino,
                 (long long)st.stx_btime.tv_sec, st.stx_btime.tv_nsec);
    else
        snprintf(out, size, "%llu", (unsigned long long)st.stx_ino);
    return 0;
}

/* Write the shadow file atomically: <shadow>/<name>.tmp, then renamed over <shadow>/<name>. */
static int shadow_open(const char *shadow, const char *name, char *tmp, char *final) {
    snprintf(tmp, PATH_MAX, "%s/%s.tmp", shadow, name);
    snprintf(final, PATH_MAX, "%s/%s", shadow, name);
    return open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static void copy_file(int fd, const char *shadow, const char *key) {
    char name[128], tmp[PATH_MAX], final[PATH_MAX], buf[65536];
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    snprintf(name, sizeof name, "f%s", key);
    int out = shadow_open(shadow, name, tmp, final);
    if (out < 0) return;
    off_t at = 0;
    while (at < st.st_size) {  /* the size when the call began: later appends are not covered */
        size_t want = (size_t)(st.st_size - at) < sizeof buf ? (size_t)(st.st_size - at) : sizeof buf;
        ssize_t n = pread(fd, buf, want, at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || write_all(out, buf, (size_t)n) != 0) break;
        at += n;
    }
    close(out);
    rename(tmp, final);
}

static void list_dir(const char *path, const char *shadow, const char *key, int is_root) {
    char name[128], tmp[PATH_MAX], final[PATH_MAX], line[PATH_MAX + 160], child[96];
    DIR *dir = opendir(path);  /* a new open file description: the caller's offset is untouched */
    if (dir == NULL) return;
    if (is_root)
        snprintf(name, sizeof name, "droot");  /* where the rebuild starts */
    else
        snprintf(name, sizeof name, "d%s", key);
    int out = shadow_open(shadow, name, tmp, final);
    if (out < 0) {
        closedir(dir);
        return;
    }
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        const char *n = entry->d_name;
        int is_dir;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strchr(n, '\n') != NULL) continue;
        if (identity(dirfd(dir), n, AT_SYMLINK_NOFOLLOW, child, sizeof child, &is_dir) != 0) continue;
        if (is_dir < 0) continue;
        int len = snprintf(line, sizeof line, "%c %s %s\n", is_dir ? 'd' : 'f', child, n);
        write_all(out, line, (size_t)len);
    }
    closedir(dir);
    close(out);
    rename(tmp, final);
}

static void log_line(const char *shadow, const char *what, const char *path) {
    char log[PATH_MAX], line[PATH_MAX + 64];
    snprintf(log, sizeof log, "%s/log", shadow);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    int len = snprintf(line, sizeof line, "%s %s\n", what, path);
    write_all(fd, line, (size_t)len);
    close(fd);
}

/* Record what syncing fd makes durable, if it is a file or directory under $POWERCUT_ROOT. */
static void record(int fd, const char *what) {
    const char *root = env_dir("POWERCUT_ROOT"), *shadow = env_dir("POWERCUT_SHADOW");
    char link[64], path[PATH_MAX], key[96];
    int is_dir;
    if (root == NULL || shadow == NULL) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0) return;
    path[n] = '\0';
    size_t rootlen = strlen(root);
    if (strncmp(path, root, rootlen) != 0 || (path[rootlen] != '/' && path[rootlen] != '\0')) return;
    int saved = errno;
    pthread_mutex_lock(&lock);
    if (identity(fd, "", AT_EMPTY_PATH, key, sizeof key, &is_dir) == 0 && is_dir >= 0) {
        if (is_dir)
            list_dir(path, shadow, key, path[rootlen] == '\0');
        else
            copy_file(fd, shadow, key);
        log_line(shadow, what, path);
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
}

static void unmodelled(const char *what) {
    const char *shadow = env_dir("POWERCUT_SHADOW");
    if (shadow == NULL || env_dir("POWERCUT_ROOT") == NULL) return;
    int saved = errno;
    pthread_mutex_lock(&lock);
    log_line(shadow, "unmodelled", what);
    pthread_mutex_unlock(&lock);
    errno = saved;
}

static void *real(const char *name) {
    void *fn = dlsym(RTLD_NEXT, name);
    if (fn == NULL) {
        fprintf(stderr, "powercut shim: no %s in libc\n", name);
        abort();
    }
    return fn;
}

int fsync(int fd) {
    static int (*next)(int);
    if (next == NULL) next = (int (*)(int))real("fsync");
    record(fd, "fsync");
    return next(fd);
}

int fdatasync(int fd) {
    static int (*next)(int);
    if (next == NULL) next = (int (*)(int))real("fdatasync");
    record(fd, "fdatasync");
    return next(fd);
}

void sync(void) {
    static void (*next)(void);
    if (next == NULL) next = (void (*)(void))real("sync");
    unmodelled("sync");
    next();
}

int syncfs(int fd) {
    static int (*next)(int);
    if (next == NULL) next = (int (*)(int))real("syncfs");
    unmodelled("syncfs");
    return next(fd);
}

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
    static int (*next)(int, off64_t, off64_t, unsigned int);
    if (next == NULL) next = (int (*)(int, off64_t, off64_t, unsigned int))real("sync_file_range");
    unmodelled("sync_file_range");
    return next(fd, offset, nbytes, flags);
}
