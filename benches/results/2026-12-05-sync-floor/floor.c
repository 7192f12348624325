// The floor of one synced 4 KiB write on a file system: what a store that makes each put
// durable on its own (db_bench / kv-demo / fjall with --sync=1 --threads=1) cannot beat.
// Usage: floor MODE OPS FILE
//   MODE 0: append 4 KiB to a growing file, fdatasync   (RocksDB's WAL: the size changes)
//   MODE 1: pwrite 4 KiB into blocks written before, fdatasync   (one data block per sync)
//   MODE 2: MODE 1 plus a 4 KiB pwrite at a fixed offset before the fdatasync
//           (an emu device's flush: the data block and its zone-table slot, one fdatasync)
//   MODE 3: MODE 2 on a sparse file whose blocks are zeroed 1 MiB at a time, 512 KiB ahead of
//           the writes (an emu device's zero-ahead on a zone taking short synced writes)
//   MODE 4: MODE 3 with each zeroed MiB's write-back started at once (sync_file_range)
// Prints the mean microseconds per op. The file is removed at the end.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODE(0|1|2|3|4) OPS FILE\n", argv[0]);
        return 2;
    }
    int mode = atoi(argv[1]);
    long n = atol(argv[2]);
    const char *path = argv[3];
    unlink(path);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) { perror("open"); return 1; }
    static char buf[4096];
    memset(buf, 'x', sizeof buf);
    if (mode == 1 || mode == 2) {
        // Written (not sparse, not unwritten-extent) blocks: a sync writes data only.
        long need = (1L << 20) + n * 4096;
        char *zero = calloc(1, 1 << 20);
        for (long done = 0; done < need; done += 1 << 20)
            if (write(fd, zero, 1 << 20) != 1 << 20) { perror("write"); return 1; }
        if (fsync(fd)) { perror("fsync"); return 1; }
    }
    static char zeros[1 << 20];
    long zeroed_to = 1L << 20; /* bytes of the data region [1 MiB, ...) known written */
    if (mode >= 3) {
        if (pwrite(fd, buf, 4096, 4096) != 4096) { perror("pwrite"); return 1; }
        if (fsync(fd)) { perror("fsync"); return 1; }
    }
    double t = now();
    for (long i = 0; i < n; i++) {
        long end = (1L << 20) + (i + 1) * 4096;
        if (mode >= 3 && end + (512L << 10) > zeroed_to) {
            if (pwrite(fd, zeros, 1 << 20, zeroed_to) != 1 << 20) { perror("zero"); return 1; }
            if (mode == 4 && sync_file_range(fd, zeroed_to, 1 << 20, SYNC_FILE_RANGE_WRITE)) {
                perror("sync_file_range");
                return 1;
            }
            zeroed_to += 1 << 20;
        }
        if (mode == 0) {
            if (write(fd, buf, 4096) != 4096) { perror("write"); return 1; }
        } else {
            if (pwrite(fd, buf, 4096, (1L << 20) + i * 4096) != 4096) { perror("pwrite"); return 1; }
            if (mode >= 2 && pwrite(fd, buf, 4096, 4096) != 4096) { perror("pwrite"); return 1; }
        }
        if (fdatasync(fd)) { perror("fdatasync"); return 1; }
    }
    printf("mode %d %.1f us/op\n", mode, (now() - t) / n * 1e6);
    close(fd);
    unlink(path);
    return 0;
}
