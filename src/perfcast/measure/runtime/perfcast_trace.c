/* perfcast trace mode: SimGrid time-independent traces of an MPI run.
 *
 * Linked only by `perfcast build --trace` (besides perfcast_rt.o and perfcast_mpi.o, whose
 * weak references to these hooks it fills in). Why: block benchmarking
 * (dperf-block-benchmarking-prediction.txt) predicts a run on a machine we do not have by
 * timing each rank's compute blocks here and letting SimGrid simulate the communication
 * there; SimGrid's `smpirun -replay` reads one file of actions per rank.
 *
 * What a run writes under $PERFCAST_TRACE_DIR (default ./perfcast-trace):
 * - rank-<r>.trace: one action a line, prefixed by the rank, in SimGrid 3.32's syntax
 *   (`init`, `compute <flops>`, `send|recv|isend|irecv <peer> <tag> <count> <dtype>`,
 *   `wait <src> <dst> <tag>`, the collectives, `finalize`). A compute block (the time
 *   between the end of one MPI call and the start of the next) becomes `compute
 *   <seconds x 1e9>`: a platform core of speed 1e9 flop/s is as fast as this machine
 *   (perfcast.simulate.platform.REFERENCE_SPEED).
 * - rank-<r>.blocks.tsv: the same blocks summed per (call path that opens the block, call
 *   path that closes it), so blocks relate to perfcast's call-path models.
 * - index.txt (absolute paths of the rank files, the file `smpirun -replay` takes) and
 *   trace.json (the run's summary), written by rank 0 after every rank has renamed its files
 *   into place: a run that crashes or aborts leaves no trace.json, and rank 0 removes an old
 *   one in MPI_Init, so a crashed run never looks complete.
 *
 * Clock: CLOCK_MONOTONIC, or the thread's CPU clock with PERFCAST_TRACE_CLOCK=cpu (a run
 * with more ranks than cores then still records what each block computed, not the time it
 * waited for a core; a block that sleeps or does I/O then counts nothing).
 *
 * Under SimGrid SMPI (`perfcast build --smpi --trace`, compiled with PERFCAST_SMPI) every
 * rank is a copy of the program in one process, and a block is what SMPI charges for the
 * burst: the core's clock (perfcast_now: the rank's simulated time, extrapolated within a
 * burst by the thread's CPU time, rebased whenever SMPI moved the rank's clock) converted
 * back to flops with the speed of the rank's host. Raw CLOCK_THREAD_CPUTIME_ID would be the
 * same while the rank runs alone, but ranks are contexts of one thread: a call that yields
 * inside a block (MPI_Wtime, sleep) would add every other rank's compute to it. Wall time
 * is refused there: it also counts waits for this machine's cores, which SMPI does not
 * charge (docs/smpi-backend.md has the measurements). The ranks still meet in MPI_Finalize
 * through PMPI_Gather, a simulated collective, so rank 0 writes trace.json after every
 * rank's files without polling the file system.
 *
 * Assumptions, stated where a user would look (README.md): MPI is called from the thread
 * that called MPI_Init (another thread stops the run); every communicator is MPI_COMM_WORLD
 * or congruent to it (peers are world ranks in SimGrid's traces); a receive from
 * MPI_ANY_SOURCE or with MPI_ANY_TAG is written with the source and tag it matched, an
 * MPI_Irecv's line deferred to its wait (the replay posts it there, a little late).
 * MPI_Sendrecv is written as irecv + isend + two waits, which keeps its tags and allows
 * MPI_PROC_NULL on either side.
 */
#define _GNU_SOURCE
#define PERFCAST_TRACE_DEFINITIONS
#include <mpi.h>

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "perfcast_rt.h"

/* The --version lines of the compiler that built the program and of the user's own, each
 * ended by a zero byte (perfcast build links them: toolchain.compilers_object); weak, as a
 * program linked by hand has none. */
extern const unsigned char perfcast_build_compilers[] __attribute__((weak));
extern const unsigned long perfcast_build_compilers_size __attribute__((weak));

#define TRACE_DIR_VARIABLE "PERFCAST_TRACE_DIR"
#define TRACE_CLOCK_VARIABLE "PERFCAST_TRACE_CLOCK"
#define DEFAULT_TRACE_DIR "perfcast-trace"
#define TRACE_FORMAT "perfcast-trace/1"
#define BLOCKS_FORMAT "perfcast-trace-blocks/1"
#define REFERENCE_SPEED 1e9 /* flop/s per traced second (simulate/platform.py): 1 flop/ns */
#define PATH_CAPACITY 4096
#define CALL_PATH_CAPACITY 8192

/* SimGrid's datatype ids (simgrid::smpi::Datatype::decode). */
enum { TYPE_DOUBLE = 0, TYPE_INT = 1, TYPE_CHAR = 2, TYPE_SHORT = 3, TYPE_LONG = 4,
       TYPE_FLOAT = 5, TYPE_BYTE = 6 };

typedef struct pending_request {
    MPI_Request request;
    int source, destination, tag;
    int deferred; /* an irecv with a wildcard source or tag: written at its wait */
    long long count;
    int type;
} pending_request;

typedef struct block_stat {
    uint32_t open, close;
    uint64_t count, ns;
} block_stat;

static int active; /* between start and finish */
static int rank, ranks;
static uint64_t run_id;
static pthread_t main_thread;
static int cpu_clock;
static char directory[PATH_CAPACITY];
static char actions_temporary[PATH_CAPACITY + 64];
static FILE *actions;
static char rank_prefix[16]; /* "<rank> " */
static uint64_t wall_start, block_start, credit_pending, credited_ns;
static uint32_t open_node;

static pending_request *requests;
static size_t request_count, request_capacity;
static block_stat *blocks;
static size_t block_count, block_capacity;
static uint32_t *block_table; /* (open, close) -> index in blocks + 1 */
static size_t block_slots;

static void stop(const char *what)
{
    fprintf(stderr, "perfcast trace: %s\n", what);
    perfcast_mark_aborted();
#ifndef PERFCAST_SMPI
    /* under SMPI, MPI_Abort ends only the calling rank's actor: smpirun then reports the
     * others stalled and exits 0, so the whole simulation is stopped instead */
    PMPI_Abort(MPI_COMM_WORLD, 1);
#endif
    abort();
}

#ifdef PERFCAST_SMPI
extern void *sg_host_self(void);
extern double sg_host_get_speed(const void *host);
/* smpi/host-speed, parsed (perfcast_rt.c reads it too: SimGrid 3.32 exports it). */
extern double _smpi_cfg_host_speed __attribute__((weak));
/* Reference flops per simulated ns of this rank's host, and per ns of real CPU time (the
 * threshold rule's credit): set in perfcast_trace_start. */
static double flops_per_simulated_ns = 1.0, flops_per_cpu_ns = 1.0;
#endif

static void *grow(void *memory, size_t *capacity, size_t size)
{
    *capacity = *capacity ? 2 * *capacity : 64;
    memory = realloc(memory, *capacity * size);
    if (memory == NULL)
        stop("out of memory for the trace");
    return memory;
}

static uint64_t trace_clock(void)
{
#ifdef PERFCAST_SMPI
    return perfcast_now(); /* simulated ns: see "Under SimGrid SMPI" above */
#else
    struct timespec now;
    clock_gettime(cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
#endif
}

/* Flops at REFERENCE_SPEED (1 a ns) for `ns` of trace_clock(). */
static inline uint64_t reference_ns(uint64_t ns)
{
#ifdef PERFCAST_SMPI
    return (uint64_t)((double)ns * flops_per_simulated_ns);
#else
    return ns;
#endif
}

static int make_directories(const char *path)
{
    char copy[PATH_CAPACITY];
    snprintf(copy, sizeof copy, "%s", path);
    for (char *c = copy + 1; *c; ++c) {
        if (*c != '/')
            continue;
        *c = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST)
            return -1;
        *c = '/';
    }
    return mkdir(copy, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* The names of the files a traced run writes (and an earlier run, or perfcast simulate
 * --synthesize, may have left): the only entries a trace directory may hold. */
static const char *const OWN_FILES[] = {
    "rank-*.trace", "rank-*.blocks.tsv", "index.txt", "trace.json", "threshold-*.tsv", ".*.tmp",
};

/* Refuse a directory that holds anything a traced run did not write: a run replaces the
 * rank files and removes index.txt and trace.json, so PERFCAST_TRACE_DIR pointed at a
 * source directory (or any of the user's) would lose the user's files of those names. */
static void require_own_directory(void)
{
    DIR *listing = opendir(directory);
    if (listing == NULL)
        return; /* the writes that follow say why */
    struct dirent *entry;
    char message[PATH_CAPACITY + 512];
    while ((entry = readdir(listing)) != NULL) {
        const char *name = entry->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        int own = 0;
        for (size_t i = 0; i < sizeof OWN_FILES / sizeof OWN_FILES[0] && !own; ++i)
            own = fnmatch(OWN_FILES[i], name, 0) == 0;
        if (!own) {
            snprintf(message, sizeof message,
                     "the trace directory %s holds %.200s, which no traced run writes: a run "
                     "replaces the trace files there, so give %s an empty or new directory",
                     directory, name, TRACE_DIR_VARIABLE);
            closedir(listing);
            stop(message);
        }
    }
    closedir(listing);
}

/* The directory of the trace, created, as an absolute path (index.txt lists absolute paths
 * so smpirun finds the rank files from wherever it runs), holding nothing but traces. */
static void choose_directory(void)
{
    const char *named = getenv(TRACE_DIR_VARIABLE);
    if (named == NULL || *named == '\0')
        named = DEFAULT_TRACE_DIR;
    char message[PATH_CAPACITY + 128];
    if (strlen(named) >= PATH_CAPACITY - 64) {
        snprintf(message, sizeof message, "%s is too long a path", TRACE_DIR_VARIABLE);
        stop(message);
    }
    if (make_directories(named) != 0 || realpath(named, directory) == NULL) {
        snprintf(message, sizeof message, "cannot create the trace directory %s: %s", named,
                 strerror(errno));
        stop(message);
    }
    require_own_directory();
}

static void read_clock_setting(void)
{
    const char *value = getenv(TRACE_CLOCK_VARIABLE);
#ifdef PERFCAST_SMPI
    cpu_clock = 1;
    if (value == NULL || *value == '\0' || strcmp(value, "cpu") == 0)
        return;
    char refusal[256];
    snprintf(refusal, sizeof refusal,
             "%s=%.64s: a program built with --smpi --trace times its blocks as SMPI charges "
             "them (CPU time): unset %s or set it to cpu",
             TRACE_CLOCK_VARIABLE, value, TRACE_CLOCK_VARIABLE);
    stop(refusal);
#else
    if (value == NULL || *value == '\0' || strcmp(value, "wall") == 0)
        return;
    if (strcmp(value, "cpu") != 0) {
        char message[256];
        snprintf(message, sizeof message, "%s=%.64s: set it to wall (the default) or cpu",
                 TRACE_CLOCK_VARIABLE, value);
        stop(message);
    }
    cpu_clock = 1;
#endif
}

/* Action lines are written with putc_unlocked rather than fprintf: formatting was most of
 * trace mode's cost per MPI call (measured: README.md). */
static void put_number(long long value)
{
    char digits[24];
    int length = 0;
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value
                                             : (unsigned long long)value;
    do {
        digits[length++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    putc_unlocked(' ', actions);
    if (value < 0)
        putc_unlocked('-', actions);
    while (length > 0)
        putc_unlocked(digits[--length], actions);
}

/* "<rank> <action>", without the line's end. */
static void begin(const char *action)
{
    fputs_unlocked(rank_prefix, actions);
    fputs_unlocked(action, actions);
}

/* The rest of a line begun with begin(): `values`, then the line's end. */
static void emit_end(const long long *values, int count)
{
    for (int i = 0; i < count; ++i)
        put_number(values[i]);
    putc_unlocked('\n', actions);
}

/* One whole action line: "<rank> <action> <values...>". */
static void emit(const char *action, const long long *values, int count)
{
    begin(action);
    emit_end(values, count);
}

void perfcast_trace_prepare(int my_rank)
{
    read_clock_setting();
    choose_directory();
    char path[PATH_CAPACITY + 32];
    /* the threshold rule's statistics of an earlier run in this directory would otherwise be
     * read as this run's when this run shortens no loop (perfcast_threshold.c writes them
     * only where a rule loop ran) */
    snprintf(path, sizeof path, "%s/threshold-%d.tsv", directory, my_rank);
    unlink(path);
    if (my_rank != 0)
        return;
    /* before the run id broadcast: no rank renames a file into place while an old
     * trace.json could still vouch for the directory */
    snprintf(path, sizeof path, "%s/trace.json", directory);
    unlink(path);
    snprintf(path, sizeof path, "%s/index.txt", directory);
    unlink(path);
}

void perfcast_trace_start(int my_rank, int world_ranks, uint64_t id, const char *init_operation)
{
    rank = my_rank;
    ranks = world_ranks;
    run_id = id;
    main_thread = pthread_self();
    snprintf(actions_temporary, sizeof actions_temporary, "%s/.rank-%d.trace.%d.tmp", directory,
             rank, (int)getpid());
    actions = fopen(actions_temporary, "w");
    if (actions == NULL) {
        char message[PATH_CAPACITY + 128];
        snprintf(message, sizeof message, "cannot write %s: %s", actions_temporary,
                 strerror(errno));
        stop(message);
    }
    setvbuf(actions, NULL, _IOFBF, 1 << 20);
    snprintf(rank_prefix, sizeof rank_prefix, "%d ", rank);
    emit("init", NULL, 0);
#ifdef PERFCAST_SMPI
    flops_per_simulated_ns = sg_host_get_speed(sg_host_self()) / REFERENCE_SPEED;
    flops_per_cpu_ns = _smpi_cfg_host_speed / REFERENCE_SPEED;
#endif
    /* the first block opens at MPI_Init's node (nodes are keyed by the name's address, so
     * the MPI layer passes its own string) */
    open_node = perfcast_mpi_node(init_operation);
    active = 1;
    wall_start = perfcast_now();
    block_start = trace_clock();
}

void perfcast_trace_credit(uint64_t ns)
{
#ifdef PERFCAST_SMPI
    ns = (uint64_t)((double)ns * flops_per_cpu_ns);
#endif
    credit_pending += ns;
    credited_ns += ns;
}

static void current_path(char *buffer, size_t capacity)
{
    perfcast_call_path(perfcast_current_node(), buffer, capacity);
    if (buffer[0] == '\0')
        snprintf(buffer, capacity, "(top level)");
}

static void refuse(const char *operation, const char *why, const char *advice)
{
    char path[CALL_PATH_CAPACITY], message[CALL_PATH_CAPACITY + 512];
    current_path(path, sizeof path);
    snprintf(message, sizeof message,
             "%s%s is not supported by trace mode (rank %d, call path %s): build without "
             "--trace, or %s",
             operation, why, rank, path, advice);
    stop(message);
}

void perfcast_trace_unsupported(const char *operation)
{
    refuse(operation, "", "change the program to use the calls README.md lists as traced");
}

static inline size_t block_slot(uint32_t open, uint32_t close, size_t slots)
{
    uint64_t h = ((uint64_t)open << 32 | close) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 32) & (slots - 1);
}

/* Rehash every block into a table twice as large (open addressing: entries are block
 * indices + 1, 0 is empty), so a lookup stays O(1) however many call-path pairs a program
 * has (LULESH: hundreds). */
static void grow_block_table(void)
{
    size_t slots = block_slots ? 2 * block_slots : 256;
    uint32_t *table = calloc(slots, sizeof *table);
    if (table == NULL)
        stop("out of memory for the trace");
    for (size_t i = 0; i < block_count; ++i) {
        size_t s = block_slot(blocks[i].open, blocks[i].close, slots);
        while (table[s] != 0)
            s = (s + 1) & (slots - 1);
        table[s] = (uint32_t)i + 1;
    }
    free(block_table);
    block_table = table;
    block_slots = slots;
}

static void add_block(uint32_t close, uint64_t ns)
{
    if (2 * (block_count + 1) > block_slots)
        grow_block_table();
    size_t s = block_slot(open_node, close, block_slots);
    for (; block_table[s] != 0; s = (s + 1) & (block_slots - 1)) {
        block_stat *b = &blocks[block_table[s] - 1];
        if (b->open == open_node && b->close == close) {
            b->count++;
            b->ns += ns;
            return;
        }
    }
    if (block_count == block_capacity)
        blocks = grow(blocks, &block_capacity, sizeof *blocks);
    blocks[block_count] = (block_stat){open_node, close, 1, ns};
    block_table[s] = (uint32_t)++block_count;
}

void perfcast_trace_enter(const char *operation, MPI_Comm comm)
{
    uint64_t now = trace_clock();
    if (!active)
        return; /* MPI calls before MPI_Init's end or after MPI_Finalize's start */
    if (!pthread_equal(pthread_self(), main_thread))
        refuse(operation, " from a thread other than the one that called MPI_Init",
               "make every MPI call from that thread");
    if (comm != MPI_COMM_WORLD) {
        int relation = MPI_UNEQUAL;
        if (comm == MPI_COMM_NULL || PMPI_Comm_compare(comm, MPI_COMM_WORLD, &relation) !=
                                         MPI_SUCCESS ||
            (relation != MPI_IDENT && relation != MPI_CONGRUENT))
            refuse(operation, " on a communicator other than MPI_COMM_WORLD",
                   "use MPI_COMM_WORLD (or a duplicate): SimGrid's traces name peers by world "
                   "rank");
    }
    uint64_t ns = reference_ns(now - block_start) + credit_pending;
    credit_pending = 0;
    /* flops = seconds x REFERENCE_SPEED = ns at 1e9 flop/s: written as an integer, which
     * formats several times faster than a double */
    if (ns > 0)
        emit("compute", (long long[]){(long long)ns}, 1);
    uint32_t close = perfcast_mpi_node(operation);
    add_block(close, ns);
    open_node = close;
}

void perfcast_trace_leave(void)
{
    if (active)
        block_start = trace_clock();
}

/* ---------------------------------------------------------------------------------------
 * Actions
 * ------------------------------------------------------------------------------------- */

typedef struct typed_count {
    long long count;
    int type;
} typed_count;

/* SimGrid knows seven datatypes; any other is written as bytes. */
static typed_count typed(long long count, MPI_Datatype type)
{
    int id = type == MPI_DOUBLE  ? TYPE_DOUBLE
             : type == MPI_INT   ? TYPE_INT
             : type == MPI_CHAR  ? TYPE_CHAR
             : type == MPI_SHORT ? TYPE_SHORT
             : type == MPI_LONG  ? TYPE_LONG
             : type == MPI_FLOAT ? TYPE_FLOAT
             : type == MPI_BYTE  ? TYPE_BYTE
                                 : -1;
    if (id >= 0)
        return (typed_count){count, id};
    int size = 0;
    if (type != MPI_DATATYPE_NULL)
        PMPI_Type_size(type, &size);
    return (typed_count){count * size, TYPE_BYTE};
}

static void write_wait(int source, int destination, int tag)
{
    emit("wait", (long long[]){source, destination, tag}, 3);
}

static void remember(MPI_Request request, pending_request entry)
{
    if (request == MPI_REQUEST_NULL)
        return;
    if (request_count == request_capacity)
        requests = grow(requests, &request_capacity, sizeof *requests);
    entry.request = request;
    requests[request_count++] = entry;
}

void perfcast_trace_p2p(const char *action, int peer, int tag, int count, MPI_Datatype type,
                        const MPI_Status *status, const MPI_Request *request)
{
    int receive = action[0] == 'r' || action[1] == 'r';
    if (!active || peer == MPI_PROC_NULL)
        return;
    typed_count t = typed(count, type);
    if (receive && request == NULL && status != NULL) {
        if (peer == MPI_ANY_SOURCE)
            peer = status->MPI_SOURCE;
        if (tag == MPI_ANY_TAG)
            tag = status->MPI_TAG;
    }
    pending_request entry = {MPI_REQUEST_NULL, receive ? peer : rank, receive ? rank : peer,
                             tag, 0, t.count, t.type};
    if (request != NULL && receive && (peer == MPI_ANY_SOURCE || tag == MPI_ANY_TAG)) {
        entry.deferred = 1;
        remember(*request, entry);
        return;
    }
    emit(action, (long long[]){peer, tag, t.count, t.type}, 4);
    if (request != NULL)
        remember(*request, entry);
}

void perfcast_trace_sendrecv(int dest, int sendtag, int sendcount, MPI_Datatype sendtype,
                             int source, int recvtag, int recvcount, MPI_Datatype recvtype,
                             const MPI_Status *status)
{
    if (!active)
        return;
    if (source == MPI_ANY_SOURCE)
        source = status->MPI_SOURCE;
    if (recvtag == MPI_ANY_TAG)
        recvtag = status->MPI_TAG;
    typed_count s = typed(sendcount, sendtype), r = typed(recvcount, recvtype);
    if (source != MPI_PROC_NULL)
        emit("irecv", (long long[]){source, recvtag, r.count, r.type}, 4);
    if (dest != MPI_PROC_NULL)
        emit("isend", (long long[]){dest, sendtag, s.count, s.type}, 4);
    if (source != MPI_PROC_NULL)
        write_wait(source, rank, recvtag);
    if (dest != MPI_PROC_NULL)
        write_wait(rank, dest, sendtag);
}

void perfcast_trace_completed(MPI_Request request, const MPI_Status *status)
{
    if (!active || request == MPI_REQUEST_NULL)
        return;
    for (size_t i = 0; i < request_count; ++i) {
        if (requests[i].request != request)
            continue;
        pending_request entry = requests[i];
        requests[i] = requests[--request_count];
        if (entry.deferred) {
            entry.source = status->MPI_SOURCE;
            entry.tag = status->MPI_TAG;
            emit("irecv", (long long[]){entry.source, entry.tag, entry.count, entry.type}, 4);
        }
        write_wait(entry.source, entry.destination, entry.tag);
        return;
    }
}

void perfcast_trace_barrier(void)
{
    if (active)
        emit("barrier", NULL, 0);
}

void perfcast_trace_rooted(const char *action, int count, MPI_Datatype type, int root)
{
    if (!active)
        return;
    typed_count t = typed(count, type);
    if (strcmp(action, "bcast") == 0)
        emit("bcast", (long long[]){t.count, root, t.type}, 3);
    else
        emit(action, (long long[]){t.count, 0, root, t.type}, 4);
}

void perfcast_trace_allreduce(int count, MPI_Datatype type)
{
    if (!active)
        return;
    typed_count t = typed(count, type);
    emit("allreduce", (long long[]){t.count, 0, t.type}, 3);
}

/* gather, scatter (root >= 0), allgather, alltoall. A count of -1 is the side MPI ignores
 * on this rank (receive arguments of a gather at a non-root, send arguments of a scatter):
 * it takes the other side's values, as MPI_IN_PLACE does. */
void perfcast_trace_exchange(const char *action, int in_place, int sendcount,
                             MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype,
                             int root)
{
    if (!active)
        return;
    int send_from_receive = sendcount < 0 || (in_place && strcmp(action, "scatter") != 0);
    if (send_from_receive) {
        sendcount = recvcount;
        sendtype = recvtype;
    } else if (recvcount < 0 || in_place) {
        recvcount = sendcount;
        recvtype = sendtype;
    }
    typed_count s = typed(sendcount, sendtype), r = typed(recvcount, recvtype);
    if (root >= 0)
        emit(action, (long long[]){s.count, r.count, root, s.type, r.type}, 5);
    else
        emit(action, (long long[]){s.count, r.count, s.type, r.type}, 4);
}

void perfcast_trace_allgatherv(int in_place, int sendcount, MPI_Datatype sendtype,
                               const int recvcounts[], MPI_Datatype recvtype)
{
    if (!active)
        return;
    if (in_place) {
        sendcount = recvcounts[rank];
        sendtype = recvtype;
    }
    typed_count s = typed(sendcount, sendtype);
    begin("allgatherv");
    put_number(s.count);
    int type = TYPE_BYTE;
    for (int i = 0; i < ranks; ++i) {
        typed_count r = typed(recvcounts[i], recvtype);
        type = r.type;
        put_number(r.count);
    }
    emit_end((long long[]){s.type, type}, 2);
}

static void write_counts(const int counts[], MPI_Datatype type, int *id)
{
    long long total = 0;
    for (int i = 0; i < ranks; ++i)
        total += typed(counts[i], type).count;
    put_number(total);
    for (int i = 0; i < ranks; ++i)
        put_number(typed(counts[i], type).count);
    *id = typed(0, type).type;
}

void perfcast_trace_alltoallv(int in_place, const int sendcounts[], MPI_Datatype sendtype,
                              const int recvcounts[], MPI_Datatype recvtype)
{
    if (!active)
        return;
    if (in_place) {
        sendcounts = recvcounts;
        sendtype = recvtype;
    }
    int send_id, receive_id;
    begin("alltoallv");
    write_counts(sendcounts, sendtype, &send_id);
    write_counts(recvcounts, recvtype, &receive_id);
    emit_end((long long[]){send_id, receive_id}, 2);
}

void perfcast_trace_reduce_scatter(const int recvcounts[], MPI_Datatype type)
{
    if (!active)
        return;
    begin("reducescatter");
    for (int i = 0; i < ranks; ++i)
        put_number(typed(recvcounts[i], type).count);
    emit_end((long long[]){0, typed(0, type).type}, 2);
}

/* ---------------------------------------------------------------------------------------
 * The end of the run
 * ------------------------------------------------------------------------------------- */

/* Close `file` (written at `temporary`) and rename it to `final_path`; 0 on success. */
static int publish(FILE *file, const char *temporary, const char *final_path)
{
    int failed = ferror(file);
    failed |= fclose(file) != 0;
    if (failed || rename(temporary, final_path) != 0) {
        fprintf(stderr, "perfcast trace: cannot write %s: %s\n", final_path, strerror(errno));
        unlink(temporary);
        return -1;
    }
    return 0;
}

static FILE *open_temporary(char *temporary, size_t capacity, const char *name)
{
    snprintf(temporary, capacity, "%s/.%s.%d.tmp", directory, name, (int)getpid());
    FILE *file = fopen(temporary, "w");
    if (file == NULL)
        fprintf(stderr, "perfcast trace: cannot write %s: %s\n", temporary, strerror(errno));
    return file;
}

static int write_blocks(void)
{
    char temporary[PATH_CAPACITY + 64], final_path[PATH_CAPACITY + 64], name[64];
    snprintf(name, sizeof name, "rank-%d.blocks.tsv", rank);
    snprintf(final_path, sizeof final_path, "%s/%s", directory, name);
    FILE *file = open_temporary(temporary, sizeof temporary, name);
    if (file == NULL)
        return -1;
    char *open_path = malloc(CALL_PATH_CAPACITY), *close_path = malloc(CALL_PATH_CAPACITY);
    if (open_path == NULL || close_path == NULL)
        stop("out of memory for the trace");
    fprintf(file, "# %s run=%016llx rank=%d\n", BLOCKS_FORMAT, (unsigned long long)run_id,
            rank);
    fprintf(file, "# open\tclose\tcount\tseconds\n");
    for (size_t i = 0; i < block_count; ++i) {
        perfcast_call_path(blocks[i].open, open_path, CALL_PATH_CAPACITY);
        perfcast_call_path(blocks[i].close, close_path, CALL_PATH_CAPACITY);
        fprintf(file, "%s\t%s\t%llu\t%.9f\n", open_path, close_path,
                (unsigned long long)blocks[i].count, (double)blocks[i].ns / 1e9);
    }
    free(open_path);
    free(close_path);
    return publish(file, temporary, final_path);
}

/* `text` as a JSON string: quotes, backslashes and control characters escaped. */
static void write_json_string(FILE *file, const char *text)
{
    fputc('"', file);
    for (const unsigned char *c = (const unsigned char *)text; *c; ++c) {
        if (*c == '"' || *c == '\\')
            fprintf(file, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(file, "\\u%04x", *c);
        else
            fputc(*c, file);
    }
    fputc('"', file);
}

/* `,\n  "compilers": {"measured": ..., "user": ...}` where the link embedded both lines. */
static void write_compilers(FILE *file)
{
    if (perfcast_build_compilers == NULL || &perfcast_build_compilers_size == NULL)
        return;
    const char *measured = (const char *)perfcast_build_compilers;
    size_t first = strnlen(measured, perfcast_build_compilers_size);
    if (first + 1 >= perfcast_build_compilers_size)
        return;
    const char *user = measured + first + 1;
    if (strnlen(user, perfcast_build_compilers_size - first - 1) + first + 2 >
        perfcast_build_compilers_size)
        return;
    fputs(",\n  \"compilers\": {\"measured\": ", file);
    write_json_string(file, measured);
    fputs(", \"user\": ", file);
    write_json_string(file, user);
    fputc('}', file);
}

/* argv[0] as the program was started (the first string of /proc/self/cmdline). Under SMPI
 * the process is SimGrid's smpimain, which smpirun starts with the program second. */
static void program_name(char *buffer, size_t capacity)
{
    buffer[0] = '\0';
    FILE *file = fopen("/proc/self/cmdline", "r");
    if (file == NULL)
        return;
    size_t length = fread(buffer, 1, capacity - 1, file);
    buffer[length] = '\0';
    fclose(file);
#ifdef PERFCAST_SMPI
    size_t first = strlen(buffer);
    if (first + 1 < length)
        memmove(buffer, buffer + first + 1, length - first);
#endif
}

static void write_summary(const double *gathered, int all_written)
{
    if (!all_written) {
        fprintf(stderr, "perfcast trace: a rank could not write its files: no trace.json in "
                        "%s\n", directory);
        return;
    }
    char temporary[PATH_CAPACITY + 64], final_path[PATH_CAPACITY + 64];
    FILE *index = open_temporary(temporary, sizeof temporary, "index.txt");
    if (index == NULL)
        return;
    for (int r = 0; r < ranks; ++r)
        fprintf(index, "%s/rank-%d.trace\n", directory, r);
    snprintf(final_path, sizeof final_path, "%s/index.txt", directory);
    if (publish(index, temporary, final_path) != 0)
        return;
    FILE *json = open_temporary(temporary, sizeof temporary, "trace.json");
    if (json == NULL)
        return;
    char program[PATH_CAPACITY];
    program_name(program, sizeof program);
    fprintf(json, "{\n  \"format\": \"%s\",\n  \"run_id\": \"%016llx\",\n  \"ranks\": %d,\n",
            TRACE_FORMAT, (unsigned long long)run_id, ranks);
    fprintf(json, "  \"reference_speed\": %.0f,\n  \"clock\": \"%s\",\n  \"program\": ",
            REFERENCE_SPEED, cpu_clock ? "cpu" : "wall");
    write_json_string(json, program);
    write_compilers(json);
    const char *lists[] = {"elapsed", "credited"};
    for (int list = 0; list < 2; ++list) {
        fprintf(json, ",\n  \"%s\": [", lists[list]);
        for (int r = 0; r < ranks; ++r)
            fprintf(json, "%s%.9f", r ? ", " : "", gathered[3 * r + list]);
        fputc(']', json);
    }
    const char *files[] = {"files", "blocks"}, *suffixes[] = {"trace", "blocks.tsv"};
    for (int list = 0; list < 2; ++list) {
        fprintf(json, ",\n  \"%s\": [", files[list]);
        for (int r = 0; r < ranks; ++r)
            fprintf(json, "%s\"rank-%d.%s\"", r ? ", " : "", r, suffixes[list]);
        fputc(']', json);
    }
    fprintf(json, "\n}\n");
    snprintf(final_path, sizeof final_path, "%s/trace.json", directory);
    publish(json, temporary, final_path);
}

void perfcast_trace_finish(void)
{
    if (!active)
        return;
    double elapsed = (double)(perfcast_now() - wall_start) / 1e9;
    active = 0;
    emit("finalize", NULL, 0);
    char final_path[PATH_CAPACITY + 64];
    snprintf(final_path, sizeof final_path, "%s/rank-%d.trace", directory, rank);
    int written = publish(actions, actions_temporary, final_path) == 0;
    actions = NULL;
    written &= write_blocks() == 0;
    double mine[3] = {elapsed, (double)credited_ns / 1e9, written};
    double *gathered = NULL;
    if (rank == 0) {
        gathered = malloc(3 * (size_t)ranks * sizeof *gathered);
        if (gathered == NULL)
            stop("out of memory for the trace");
    }
    PMPI_Gather(mine, 3, MPI_DOUBLE, gathered, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int all_written = 1;
        for (int r = 0; r < ranks; ++r)
            all_written &= gathered[3 * r + 2] != 0.0;
        write_summary(gathered, all_written);
        free(gathered);
    }
}
