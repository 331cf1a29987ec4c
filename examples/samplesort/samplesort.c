/* Parallel sample sort of 32-bit keys, weak scaling: every rank starts with N keys.
 *
 *   usage: mpirun -np P ./samplesort N [SEED]
 *
 * Steps: generate keys, sort locally, pick p-1 regular samples per rank and gather them
 * everywhere (MPI_Allgather), choose p-1 splitters, route every key to the rank owning its
 * bucket (MPI_Alltoall of counts, MPI_Alltoallv of keys), sort the received keys, and check
 * the result (MPI_Allreduce). The merge sort is bottom-up (iterative) so the call tree does
 * not depend on N. Known complexity per call path: see README.md.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void generate_keys(uint32_t *keys, int n, unsigned seed, int rank)
{
    uint64_t state = seed * 6364136223846793005ULL + (uint64_t)rank * 1442695040888963407ULL + 1;
    for (int i = 0; i < n; ++i) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        keys[i] = (uint32_t)(state >> 33);
    }
}

/* Bottom-up merge sort: ceil(log2 n) passes of n element moves each. */
__attribute__((noinline)) void sort_local(uint32_t *keys, int n)
{
    uint32_t *scratch = malloc((size_t)(n > 0 ? n : 1) * sizeof *scratch);
    uint32_t *from = keys, *to = scratch;
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n;
            int hi = lo + 2 * width < n ? lo + 2 * width : n;
            int a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                to[k++] = from[a] <= from[b] ? from[a++] : from[b++];
            while (a < mid)
                to[k++] = from[a++];
            while (b < hi)
                to[k++] = from[b++];
        }
        uint32_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != keys)
        memcpy(keys, from, (size_t)n * sizeof *keys);
    free(scratch);
}

/* p-1 splitters from p-1 regular samples of every rank's sorted keys. */
__attribute__((noinline)) void choose_splitters(const uint32_t *sorted, int n, uint32_t *splitters,
                                               int ranks)
{
    int s = ranks - 1;
    uint32_t *samples = calloc((size_t)(s > 0 ? s : 1), sizeof *samples);
    uint32_t *all = malloc((size_t)(s > 0 ? s * ranks : 1) * sizeof *all);
    for (int i = 0; i < s; ++i)
        samples[i] = sorted[(long)(i + 1) * n / ranks];
    MPI_Allgather(samples, s, MPI_UINT32_T, all, s, MPI_UINT32_T, MPI_COMM_WORLD);
    sort_local(all, s * ranks);
    for (int i = 0; i < s; ++i)
        splitters[i] = all[(i + 1) * s];
    free(samples);
    free(all);
}

/* Number of sorted keys that go to each rank: one binary search per splitter. */
__attribute__((noinline)) void count_buckets(const uint32_t *sorted, int n,
                                            const uint32_t *splitters, int ranks, int *counts)
{
    int start = 0;
    for (int r = 0; r < ranks - 1; ++r) {
        int lo = start, hi = n;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (sorted[mid] < splitters[r])
                lo = mid + 1;
            else
                hi = mid;
        }
        counts[r] = lo - start;
        start = lo;
    }
    counts[ranks - 1] = n - start;
}

static int parse_positive(const char *text, const char *what)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value <= 0 || value > 100000000) {
        fprintf(stderr, "samplesort: %s must be a positive integer, got '%s'\n", what, text);
        exit(2);
    }
    return (int)value;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s N [SEED]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = parse_positive(argv[1], "N");
    unsigned seed = argc == 3 ? (unsigned)parse_positive(argv[2], "SEED") : 1;
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);

    uint32_t *keys = malloc((size_t)n * sizeof *keys);
    uint32_t *splitters = malloc((size_t)ranks * sizeof *splitters);
    int *send_counts = malloc((size_t)ranks * sizeof *send_counts);
    int *recv_counts = malloc((size_t)ranks * sizeof *recv_counts);
    int *send_offsets = malloc((size_t)ranks * sizeof *send_offsets);
    int *recv_offsets = malloc((size_t)ranks * sizeof *recv_offsets);

    generate_keys(keys, n, seed, rank);
    sort_local(keys, n);
    choose_splitters(keys, n, splitters, ranks);
    count_buckets(keys, n, splitters, ranks, send_counts);
    MPI_Alltoall(send_counts, 1, MPI_INT, recv_counts, 1, MPI_INT, MPI_COMM_WORLD);
    int received = 0;
    for (int r = 0; r < ranks; ++r) {
        send_offsets[r] = r == 0 ? 0 : send_offsets[r - 1] + send_counts[r - 1];
        recv_offsets[r] = received;
        received += recv_counts[r];
    }
    uint32_t *bucket = malloc((size_t)(received > 0 ? received : 1) * sizeof *bucket);
    MPI_Alltoallv(keys, send_counts, send_offsets, MPI_UINT32_T, bucket, recv_counts,
                  recv_offsets, MPI_UINT32_T, MPI_COMM_WORLD);
    sort_local(bucket, received);

    long local[2] = {received, 0}, total[2];
    for (int i = 1; i < received; ++i)
        local[1] += bucket[i - 1] > bucket[i];
    MPI_Allreduce(local, total, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("samplesort: n=%d p=%d keys=%ld out_of_order=%ld\n", n, ranks, total[0], total[1]);
    free(keys);
    free(splitters);
    free(send_counts);
    free(recv_counts);
    free(send_offsets);
    free(recv_offsets);
    free(bucket);
    MPI_Finalize();
    return total[0] == (long)n * ranks && total[1] == 0 ? 0 : 1;
}
