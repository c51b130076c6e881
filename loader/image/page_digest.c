/* page_digest.c — a lower-half helper thread that computes an image file's page digest while
 * the manager writes it (chunks past the header as soon as they are written, the header's
 * last), and starts the write-back of each chunk it has hashed. */
#include "page_digest.h"
#include "lower_fds.h"

#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_BYTES SHA256_PAGES_CHUNK_BYTES

struct page_digest {
    pthread_t thread;
    int fd;
    uint64_t header_end, file_size, n_chunks;
    uint64_t final_below;   /* atomic: written by the writer */
    int state;              /* atomic: 0 writing, 1 written, -1 given up */
    unsigned char *digests; /* n_chunks * 32 */
    unsigned char *buf;
};

static int hash_chunk(struct page_digest *d, uint64_t k)
{
    return sha256_pages_chunk(d->fd, k, d->file_size, d->digests + k * 32, d->buf);
}

/* Chunks that do not touch the header, in file order, each once the writer is past its end;
 * then the header's chunks. Polls every millisecond: a chunk takes ~50 ms to hash. */
static void *digest_main(void *arg)
{
    struct page_digest *d = arg;
    uint64_t first = (d->header_end + CHUNK_BYTES - 1) / CHUNK_BYTES, k = first;
    while (k < d->n_chunks) {
        int state = __atomic_load_n(&d->state, __ATOMIC_ACQUIRE);
        if (state < 0)
            return (void *)(intptr_t)-1;
        uint64_t ready = __atomic_load_n(&d->final_below, __ATOMIC_ACQUIRE);
        uint64_t end = (k + 1) * CHUNK_BYTES < d->file_size ? (k + 1) * CHUNK_BYTES : d->file_size;
        if (state == 0 && ready < end) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            continue;
        }
        if (hash_chunk(d, k) != 0)
            return (void *)(intptr_t)-1;
        /* Start writing the chunk back now: the fsync of publish then finds most of the file
         * on disk already, instead of all of it to write after the pause. */
        sync_file_range(d->fd, (off_t)(k * CHUNK_BYTES), (off_t)CHUNK_BYTES, SYNC_FILE_RANGE_WRITE);
        k++;
    }
    while (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == 0) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) < 0)
        return (void *)(intptr_t)-1;
    for (k = 0; k < first && k < d->n_chunks; k++)
        if (hash_chunk(d, k) != 0)
            return (void *)(intptr_t)-1;
    return NULL;
}

struct page_digest *page_digest_start(const char *path, uint64_t header_end, uint64_t file_size)
{
    struct page_digest *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->header_end = header_end;
    d->file_size = file_size;
    d->n_chunks = sha256_pages_chunks(file_size);
    d->final_below = header_end;
    d->fd = lower_open(path, O_RDONLY | O_CLOEXEC);
    d->digests = malloc(d->n_chunks ? d->n_chunks * 32 : 1);
    d->buf = malloc(SHA256_PAGES_SCRATCH);
    if (d->fd < 0 || !d->digests || !d->buf ||
        pthread_create(&d->thread, NULL, digest_main, d) != 0) {
        if (d->fd >= 0)
            close(d->fd);
        free(d->digests);
        free(d->buf);
        free(d);
        return NULL;
    }
    return d;
}

void page_digest_progress(struct page_digest *d, uint64_t final_below)
{
    if (d)
        __atomic_store_n(&d->final_below, final_below, __ATOMIC_RELEASE);
}

void page_digest_written(struct page_digest *d, int ok)
{
    if (d)
        __atomic_store_n(&d->state, ok ? 1 : -1, __ATOMIC_RELEASE);
}

int page_digest_finish(struct page_digest *d, char hex[65])
{
    if (!d)
        return -1;
    void *ret = NULL;
    pthread_join(d->thread, &ret);
    int rc = ret == NULL && __atomic_load_n(&d->state, __ATOMIC_ACQUIRE) > 0 ? 0 : -1;
    if (rc == 0 && hex)
        sha256_of_digests(d->digests, d->n_chunks, hex);
    close(d->fd);
    free(d->digests);
    free(d->buf);
    free(d);
    return rc;
}

void page_digest_cancel(struct page_digest *d)
{
    if (!d)
        return;
    page_digest_written(d, 0);
    page_digest_finish(d, NULL);
}
