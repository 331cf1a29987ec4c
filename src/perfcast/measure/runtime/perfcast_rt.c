/* perfcast call-path profiling runtime: the core.
 *
 * Linked into every program `perfcast build` links (see ../README.md for the design, the
 * measured choice of clang XRay, and the profile format). It is compiled by perfcast on
 * first use WITHOUT instrumentation, so nothing here ever raises an event of its own.
 *
 * - Function entry/exit come from clang XRay. At start-up (a constructor that runs before
 *   C++ static initialisers) every XRay function id is named from the executable's ELF
 *   symbol table, and only the functions of the filter (plus main) are patched; unpatched
 *   XRay sleds cost a jump over a few nops.
 * - Every thread has its own call-path tree: a node per (parent, function) with visits,
 *   inclusive time and executed basic blocks; exclusive time is derived at the end.
 * - With PERFCAST_CPU_TIME=1, every frame also reads the calling thread's CPU clock
 *   (CLOCK_THREAD_CPUTIME_ID) at entry and exit: CPU time does not grow when other
 *   processes share the core, wall time does. The clock is a system call (~0.3 us here,
 *   against ~0.02 us for CLOCK_MONOTONIC's vDSO), so it is opt-in.
 * - With `--counters`, SanitizerCoverage calls __sanitizer_cov_trace_pc_guard on every basic
 *   block; the callback adds one to the current call path's counter. Because XRay's entry
 *   sled runs before the function's first block, every block is counted in its own
 *   function (blocks of unmeasured functions count in the nearest measured caller).
 * - MPI calls are recorded by perfcast_mpi.c through perfcast_record_mpi().
 * - At exit, one file per process is written under a temporary name and renamed into
 *   place, so a run that dies never leaves a file that parses as a complete profile.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "perfcast_rt.h"

#define PROFILE_FORMAT_VERSION 2
#define PROFILE_DIR_VARIABLE "PERFCAST_PROFILE_DIR"
#define CPU_TIME_VARIABLE "PERFCAST_CPU_TIME"
#define DEFAULT_PROFILE_DIR "perfcast-profile"
#define FILTER_VARIABLE "PERFCAST_FILTER"
#define NODES_PER_CHUNK 4096
#define INITIAL_TABLE_SLOTS 1024
#define INITIAL_STACK_FRAMES 256

/* XRay's C ABI; xray/xray_interface.h is C++-only. Weak so that a program linked without
 * XRay still runs (and measures only its MPI calls). */
enum { XRAY_ENTRY = 0, XRAY_EXIT = 1, XRAY_TAIL = 2, XRAY_LOG_ARGS_ENTRY = 3 };
extern int __xray_set_handler(void (*handler)(int32_t, int)) __attribute__((weak));
extern int __xray_patch(void) __attribute__((weak));
extern int __xray_patch_function(int32_t id) __attribute__((weak));
extern uintptr_t __xray_function_address(int32_t id) __attribute__((weak));
extern size_t __xray_max_function_id(void) __attribute__((weak));
#ifdef PERFCAST_SMPI
extern void __xray_init(void);
#endif

/* The filter `perfcast build --filter` embeds (the names' bytes, each name ended by a zero
 * byte, `perfcast_embedded_filter_size` bytes in all: data, never source text), and the C++
 * demangler when the program links libstdc++; all weak because any may be absent. */
extern const unsigned char perfcast_embedded_filter[] __attribute__((weak));
extern const unsigned long perfcast_embedded_filter_size __attribute__((weak));
extern char *__cxa_demangle(const char *mangled, char *buffer, size_t *length, int *status)
    __attribute__((weak));

/* ---------------------------------------------------------------------------------------
 * Call-path trees
 * ------------------------------------------------------------------------------------- */

typedef struct mpi_stat {
    struct mpi_stat *next;
    int comm_size;
    uint64_t calls, bytes_sent, bytes_received;
} mpi_stat;

typedef struct node {
    uint32_t parent;  /* node 0 is the thread's root: "no measured function active" */
    const char *name; /* interned, so a pointer comparison is a name comparison */
    uint64_t visits, inclusive_ns, inclusive_cpu_ns, basic_blocks;
    mpi_stat *mpi;
} node;

typedef struct frame {
    uint32_t node;
    int32_t function;
    uint64_t start, cpu_start;
} frame;

typedef struct thread_state {
    struct thread_state *next;
    int index;
    node **chunks; /* nodes never move, so a pointer to a counter stays valid */
    uint32_t node_count, chunk_count;
    uint32_t *table; /* open addressing, (parent, name) -> node index + 1 */
    uint32_t table_slots;
    frame *stack;
    uint32_t depth, stack_frames;
    uint32_t current;
} thread_state;

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_state *threads;
static int thread_count;
static __thread thread_state *self;
static __thread uint64_t *basic_block_slot; /* the current call path's counter */

static const char ROOT_NAME[] = "";

static void fatal(const char *what)
{
    fprintf(stderr, "perfcast runtime: %s\n", what);
    abort();
}

static void *checked_calloc(size_t count, size_t size)
{
    void *memory = calloc(count, size);
    if (memory == NULL)
        fatal("out of memory for the call-path profile");
    return memory;
}

static void *checked_realloc(void *memory, size_t size)
{
    memory = realloc(memory, size);
    if (memory == NULL)
        fatal("out of memory for the call-path profile");
    return memory;
}

static inline node *node_at(thread_state *t, uint32_t index)
{
    return &t->chunks[index / NODES_PER_CHUNK][index % NODES_PER_CHUNK];
}

static uint32_t add_node(thread_state *t, uint32_t parent, const char *name)
{
    uint32_t index = t->node_count;
    if (index % NODES_PER_CHUNK == 0) {
        t->chunks = checked_realloc(t->chunks, (t->chunk_count + 1) * sizeof *t->chunks);
        t->chunks[t->chunk_count++] = checked_calloc(NODES_PER_CHUNK, sizeof(node));
    }
    t->node_count++;
    node *n = node_at(t, index);
    n->parent = parent;
    n->name = name;
    return index;
}

static inline uint32_t slot_of(uint32_t parent, const char *name, uint32_t slots)
{
    uint64_t h = (uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ULL;
    h ^= (uint64_t)parent * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 31;
    return (uint32_t)(h & (slots - 1));
}

static void grow_table(thread_state *t)
{
    uint32_t slots = t->table_slots * 2;
    uint32_t *table = checked_calloc(slots, sizeof *table);
    for (uint32_t index = 1; index < t->node_count; ++index) {
        node *n = node_at(t, index);
        uint32_t s = slot_of(n->parent, n->name, slots);
        while (table[s] != 0)
            s = (s + 1) & (slots - 1);
        table[s] = index + 1;
    }
    free(t->table);
    t->table = table;
    t->table_slots = slots;
}

/* The child of `parent` called `name`, created on first sight. */
static uint32_t child_of(thread_state *t, uint32_t parent, const char *name)
{
    uint32_t s = slot_of(parent, name, t->table_slots);
    for (;; s = (s + 1) & (t->table_slots - 1)) {
        uint32_t entry = t->table[s];
        if (entry == 0)
            break;
        node *n = node_at(t, entry - 1);
        if (n->parent == parent && n->name == name)
            return entry - 1;
    }
    uint32_t index = add_node(t, parent, name);
    if (2 * t->node_count > t->table_slots)
        grow_table(t);
    else
        t->table[s] = index + 1;
    return index;
}

static thread_state *attach_thread(void)
{
    thread_state *t = checked_calloc(1, sizeof *t);
    t->table_slots = INITIAL_TABLE_SLOTS;
    t->table = checked_calloc(t->table_slots, sizeof *t->table);
    t->stack_frames = INITIAL_STACK_FRAMES;
    t->stack = checked_calloc(t->stack_frames, sizeof *t->stack);
    add_node(t, 0, ROOT_NAME);
    pthread_mutex_lock(&threads_lock);
    t->index = thread_count++;
    t->next = threads;
    threads = t;
    pthread_mutex_unlock(&threads_lock);
    self = t;
    basic_block_slot = &node_at(t, 0)->basic_blocks;
    return t;
}

static inline thread_state *this_thread(void)
{
    return self != NULL ? self : attach_thread();
}

static int cpu_time_enabled; /* PERFCAST_CPU_TIME=1, read once at start-up */

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

#ifdef PERFCAST_SMPI
/* Under SimGrid SMPI (`perfcast build --smpi`) the clock is the rank's simulated time.
 * SMPI runs every rank in one process, one at a time: while a rank computes, the simulated
 * clock (simgrid_get_clock) stands at the instant the rank was resumed, and SMPI later
 * charges the burst's measured duration scaled by smpi/host-speed over the host's speed.
 * Reading MPI_Wtime instead would end the burst (a simcall and a context switch per
 * event; docs/smpi-backend.md). So the rank's time is the clock at its resumption plus
 * the compute since then, scaled the same way. "Compute" is the thread's CPU time, as
 * SMPI measures its bursts (smpi_bench_end: xbt_os_threadtimer, CLOCK_THREAD_CPUTIME_ID):
 * with the wall clock, a rank that waited for this machine's core (other load) ran ahead
 * of what SMPI charged, the computing function kept the excess and the next MPI call was
 * cut to 0 (docs/smpi-backend.md, "The clock under load"). A resumption is seen as a change of
 * the simulated clock since the last reading, or announced by the MPI layer
 * (perfcast_resumed) right after every wrapped call returns. Every rank has its own copy
 * of these variables: SMPI loads one copy of the program per rank (smpi/privatization). */
extern double simgrid_get_clock(void);
/* smpi/host-speed, parsed: SMPI keeps it in this exported double (SimGrid 3.32; the option
 * is a string with units, so sg_cfg_get_double cannot read it). */
extern double _smpi_cfg_host_speed __attribute__((weak));
extern void *sg_host_self(void);
extern double sg_host_get_speed(const void *host);

static uint64_t thread_cpu_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

static double simulated_base = -1.0; /* simulated seconds at the rank's last resumption */
static uint64_t real_base;           /* the thread's CPU time then */
static double speed_ratio;           /* simulated seconds per real second of compute */

void perfcast_resumed(void)
{
    if (speed_ratio == 0.0) {
        if (&_smpi_cfg_host_speed == NULL)
            fatal("this SimGrid does not export smpi/host-speed (_smpi_cfg_host_speed); "
                  "perfcast build --smpi needs SimGrid 3.32");
        speed_ratio = _smpi_cfg_host_speed / sg_host_get_speed(sg_host_self());
    }
    simulated_base = simgrid_get_clock();
    real_base = thread_cpu_ns();
}

/* SMPI charges a burst only from MPI_Init on and only above smpi/cpu-threshold, so the
 * clock at a resumption can stand before the rank's last extrapolated reading (LULESH's
 * MPI_Init came out as -12 us, an unsigned wrap to 1.8e19 ns). Readings never go back: a
 * call that SMPI charged less than the real time extrapolated before it lasts 0. */
static uint64_t last_reading;

uint64_t perfcast_now(void)
{
    if (simgrid_get_clock() != simulated_base)
        perfcast_resumed();
    double elapsed = (double)(thread_cpu_ns() - real_base) * speed_ratio;
    uint64_t reading = (uint64_t)(simulated_base * 1e9 + elapsed);
    if (reading < last_reading)
        reading = last_reading;
    return last_reading = reading;
}
#define CLOCK_DESCRIPTION "SIMGRID_SIMULATED ns"
#else
uint64_t perfcast_now(void)
{
    return monotonic_ns();
}
#define CLOCK_DESCRIPTION "CLOCK_MONOTONIC ns"
#endif

uint64_t perfcast_cpu_now(void)
{
    if (!cpu_time_enabled)
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

static void enter(thread_state *t, int32_t function, const char *name)
{
    uint32_t index = child_of(t, t->current, name);
    node *n = node_at(t, index);
    n->visits++;
    if (t->depth == t->stack_frames) {
        t->stack_frames *= 2;
        t->stack = checked_realloc(t->stack, t->stack_frames * sizeof *t->stack);
    }
    t->current = index;
    basic_block_slot = &n->basic_blocks;
    t->stack[t->depth++] = (frame){index, function, perfcast_now(), perfcast_cpu_now()};
}

/* Close `function`'s frame. Frames above it whose exit was never seen (left by a C++
 * exception or longjmp) are closed at the same time; an exit without a matching entry
 * is ignored. */
static void leave(thread_state *t, int32_t function)
{
    uint64_t cpu_now = perfcast_cpu_now(), now = perfcast_now();
    uint32_t depth = t->depth;
    while (depth > 0 && t->stack[depth - 1].function != function)
        depth--;
    if (depth == 0)
        return;
    for (uint32_t i = t->depth; i-- > depth - 1;) {
        node *n = node_at(t, t->stack[i].node);
        n->inclusive_ns += now - t->stack[i].start;
        n->inclusive_cpu_ns += cpu_now - t->stack[i].cpu_start;
    }
    t->depth = depth - 1;
    t->current = t->depth > 0 ? t->stack[t->depth - 1].node : 0;
    basic_block_slot = &node_at(t, t->current)->basic_blocks;
}

/* ---------------------------------------------------------------------------------------
 * Function names and the filter
 * ------------------------------------------------------------------------------------- */

typedef struct symbol {
    uintptr_t address;
    const char *name;
} symbol;

static const char **function_names; /* by XRay function id */
static size_t function_count;
static size_t patched_count;
static const char *filter_source = "all";
static char **filter;
static unsigned char *filter_used;
static size_t filter_count;

/* Equal strings share one copy, so nodes can compare names by pointer. */
static const char *intern(const char *text)
{
    static const char **slots;
    static size_t slot_count, used;
    if (2 * (used + 1) > slot_count) {
        size_t count = slot_count ? 2 * slot_count : 1024;
        const char **grown = checked_calloc(count, sizeof *grown);
        for (size_t i = 0; i < slot_count; ++i) {
            if (slots[i] == NULL)
                continue;
            size_t s = 0;
            for (const char *c = slots[i]; *c; ++c)
                s = s * 131 + (unsigned char)*c;
            while (grown[s & (count - 1)] != NULL)
                s++;
            grown[s & (count - 1)] = slots[i];
        }
        free(slots);
        slots = grown;
        slot_count = count;
    }
    size_t s = 0;
    for (const char *c = text; *c; ++c)
        s = s * 131 + (unsigned char)*c;
    for (;; s++) {
        const char **slot = &slots[s & (slot_count - 1)];
        if (*slot == NULL) {
            *slot = strdup(text);
            if (*slot == NULL)
                fatal("out of memory for function names");
            used++;
            return *slot;
        }
        if (strcmp(*slot, text) == 0)
            return *slot;
    }
}

static int compare_symbols(const void *a, const void *b)
{
    const symbol *x = a, *y = b;
    if (x->address != y->address)
        return x->address < y->address ? -1 : 1;
    return strcmp(x->name, y->name);
}

#ifdef PERFCAST_SMPI
/* Under SMPI the program is a shared object that smpirun loaded (one copy per rank), not
 * the executable: the object holding this runtime is the program. */
static Dl_info program_object(void)
{
    Dl_info info = {0};
    if (dladdr((void *)&perfcast_now, &info) == 0 || info.dli_fname == NULL)
        fatal("cannot find the SMPI program's shared object");
    return info;
}

static const char *program_file(void)
{
    return program_object().dli_fname;
}

static uintptr_t program_bias(void)
{
    return (uintptr_t)program_object().dli_fbase;
}
#else
static int first_object_bias(struct dl_phdr_info *info, size_t size, void *bias)
{
    (void)size;
    *(uintptr_t *)bias = info->dlpi_addr;
    return 1; /* the first object is the executable itself */
}

static const char *program_file(void)
{
    return "/proc/self/exe";
}

static uintptr_t program_bias(void)
{
    uintptr_t bias = 0;
    dl_iterate_phdr(first_object_bias, &bias);
    return bias;
}
#endif

/* The executable's function symbols, sorted by run-time address. The file stays mapped:
 * the names point into it. */
static symbol *load_symbols(size_t *count)
{
    *count = 0;
    int fd = open(program_file(), O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat info;
    void *image = MAP_FAILED;
    if (fstat(fd, &info) == 0 && (size_t)info.st_size >= sizeof(Elf64_Ehdr))
        image = mmap(NULL, (size_t)info.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (image == MAP_FAILED)
        return NULL;
    const Elf64_Ehdr *header = image;
    if (memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 || header->e_ident[EI_CLASS] != ELFCLASS64)
        return NULL;
    const Elf64_Shdr *sections = (const Elf64_Shdr *)((const char *)image + header->e_shoff);
    const Elf64_Shdr *table = NULL;
    for (int pass = 0; pass < 2 && table == NULL; ++pass)
        for (unsigned i = 0; i < header->e_shnum; ++i)
            if (sections[i].sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM))
                table = &sections[i];
    if (table == NULL)
        return NULL;
    const Elf64_Sym *entries = (const Elf64_Sym *)((const char *)image + table->sh_offset);
    const char *strings = (const char *)image + sections[table->sh_link].sh_offset;
    size_t total = table->sh_size / sizeof *entries;
    uintptr_t bias = program_bias();
    symbol *symbols = checked_calloc(total ? total : 1, sizeof *symbols);
    for (size_t i = 0; i < total; ++i)
        if (ELF64_ST_TYPE(entries[i].st_info) == STT_FUNC && entries[i].st_value != 0)
            symbols[(*count)++] = (symbol){bias + entries[i].st_value, strings + entries[i].st_name};
    qsort(symbols, *count, sizeof *symbols, compare_symbols);
    return symbols;
}

static const char *symbol_at(const symbol *symbols, size_t count, uintptr_t address)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (symbols[mid].address < address)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < count && symbols[lo].address == address ? symbols[lo].name : NULL;
}

/* The name call paths show: demangled C++ (when the demangler is linked) or the symbol. A
 * demangled name containing the call-path separator "->" keeps its mangled form. */
static char *display_name(const char *symbol_name)
{
    if (strncmp(symbol_name, "_Z", 2) == 0 && __cxa_demangle != NULL) {
        int status = -1;
        char *demangled = __cxa_demangle(symbol_name, NULL, NULL, &status);
        if (status == 0 && demangled != NULL && strstr(demangled, "->") == NULL)
            return demangled;
        free(demangled);
    }
    char *copy = strdup(symbol_name);
    if (copy == NULL)
        fatal("out of memory for function names");
    return copy;
}

/* "ns::f<int>(double) const" -> "ns::f<int>": the name without its parameter list. */
static char *without_parameters(const char *name)
{
    const char *close = strrchr(name, ')');
    if (close == NULL)
        return NULL;
    int level = 0;
    for (const char *c = close; c >= name; --c) {
        level += *c == ')' ? 1 : *c == '(' ? -1 : 0;
        if (level == 0)
            return c > name ? strndup(name, (size_t)(c - name)) : NULL;
    }
    return NULL;
}

/* "void ns::f<ns::V<double> >(double)" -> "ns::f": without the parameter list, every template
 * argument list and a template's return type; NULL for an operator spelt with <, > or ->
 * (they are no argument list). Why: a taint profile names a template as the source spells
 * it, a program holds its instantiations, and this is what both say
 * (elf_symbols.qualified_name). */
static char *qualified_name(const char *name)
{
    const char *operator_at = strstr(name, "operator");
    if (operator_at != NULL) {
        const char *after = operator_at + strlen("operator");
        while (*after == ' ')
            after++;
        if (*after == '<' || *after == '>' || *after == '-')
            return NULL;
    }
    char *shortened = without_parameters(name);
    const char *text = shortened != NULL ? shortened : name;
    char *kept = checked_calloc(strlen(text) + 1, 1);
    size_t length = 0;
    int depth = 0;
    for (const char *c = text; *c; ++c) {
        if (*c == '<')
            depth++;
        else if (*c == '>' && depth > 0)
            depth--;
        else if (depth == 0)
            kept[length++] = *c;
    }
    free(shortened);
    while (length > 0 && kept[length - 1] == ' ')
        kept[--length] = '\0';
    size_t start = 0; /* a return type ends at the last space outside parentheses */
    depth = 0;
    for (size_t i = 0; i < length; ++i) {
        depth += kept[i] == '(' ? 1 : kept[i] == ')' ? -1 : 0;
        if (kept[i] == ' ' && depth == 0)
            start = i + 1;
    }
    memmove(kept, kept + start, length - start + 1);
    if (*kept == '\0') {
        free(kept);
        return NULL;
    }
    return kept;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_filter_entry(const char *line, size_t length)
{
    while (length > 0 && (*line == ' ' || *line == '\t')) {
        line++;
        length--;
    }
    while (length > 0 && (line[length - 1] == ' ' || line[length - 1] == '\t' ||
                          line[length - 1] == '\r' || line[length - 1] == '\n'))
        length--;
    if (length == 0 || *line == '#')
        return;
    filter = checked_realloc(filter, (filter_count + 1) * sizeof *filter);
    filter[filter_count] = strndup(line, length);
    if (filter[filter_count] == NULL)
        fatal("out of memory for the filter");
    filter_count++;
}

/* The filter: the file named by PERFCAST_FILTER if set (a run-time override), else the
 * list embedded at link time, else none (every function is measured). */
static int load_filter(void)
{
    const char *path = getenv(FILTER_VARIABLE);
    if (path != NULL && *path != '\0') {
        FILE *file = fopen(path, "r");
        if (file == NULL) {
            fprintf(stderr, "perfcast runtime: cannot read the filter file %s=%s: %s\n",
                    FILTER_VARIABLE, path, strerror(errno));
            exit(2);
        }
        char *line = NULL;
        size_t capacity = 0;
        ssize_t length;
        while ((length = getline(&line, &capacity, file)) >= 0)
            add_filter_entry(line, (size_t)length);
        free(line);
        fclose(file);
        filter_source = path;
    } else if (perfcast_embedded_filter != NULL && &perfcast_embedded_filter_size != NULL) {
        const char *names = (const char *)perfcast_embedded_filter;
        size_t size = perfcast_embedded_filter_size;
        for (size_t start = 0; start < size;) {
            size_t length = strnlen(names + start, size - start);
            add_filter_entry(names + start, length);
            start += length + 1;
        }
        filter_source = "embedded";
    } else {
        return 0;
    }
    qsort(filter, filter_count, sizeof *filter, compare_strings);
    filter_used = checked_calloc(filter_count ? filter_count : 1, 1);
    return 1;
}

static int filter_matches(const char *candidate)
{
    if (candidate == NULL || filter_count == 0)
        return 0;
    char **hit = bsearch(&candidate, filter, filter_count, sizeof *filter, compare_strings);
    if (hit == NULL)
        return 0;
    filter_used[hit - filter] = 1;
    return 1;
}

static void on_xray_event(int32_t function, int type)
{
    thread_state *t = this_thread();
    if (type == XRAY_ENTRY || type == XRAY_LOG_ARGS_ENTRY)
        enter(t, function, function_names[function]);
    else if (type == XRAY_EXIT || type == XRAY_TAIL)
        leave(t, function);
}

/* The second pass of the filter: an entry that named no function exactly selects the
 * functions whose qualified name is its own (every instantiation of a template the taint
 * profile names as the source spells it); elf_symbols.select does the same at the link. */
static void match_qualified_names(unsigned char *patched)
{
    char **wanted = checked_calloc(filter_count ? filter_count : 1, sizeof *wanted);
    size_t *entry = checked_calloc(filter_count ? filter_count : 1, sizeof *entry);
    size_t count = 0;
    for (size_t i = 0; i < filter_count; ++i) {
        char *qualified = filter_used[i] ? NULL : qualified_name(filter[i]);
        if (qualified == NULL)
            continue;
        wanted[count] = qualified;
        entry[count++] = i;
    }
    for (size_t id = 1; count > 0 && id <= function_count; ++id) {
        if (patched[id] || function_names[id] == NULL)
            continue;
        char *qualified = qualified_name(function_names[id]);
        if (qualified == NULL)
            continue;
        int hit = 0;
        for (size_t k = 0; k < count; ++k) {
            if (strcmp(wanted[k], qualified) == 0) {
                filter_used[entry[k]] = 1;
                hit = 1;
            }
        }
        free(qualified);
        if (hit) {
            __xray_patch_function((int32_t)id);
            patched[id] = 1;
            patched_count++;
        }
    }
    for (size_t k = 0; k < count; ++k)
        free(wanted[k]);
    free(wanted);
    free(entry);
}

/* Name every XRay function and patch the ones to measure. */
static void instrument_functions(void)
{
    if (__xray_set_handler == NULL || __xray_max_function_id == NULL)
        return;
    size_t symbol_count;
    symbol *symbols = load_symbols(&symbol_count);
    int filtered = load_filter();
    function_count = __xray_max_function_id();
    function_names = checked_calloc(function_count + 1, sizeof *function_names);
    unsigned char *patched = checked_calloc(function_count + 1, 1);
    for (size_t id = 1; id <= function_count; ++id) {
        uintptr_t address = __xray_function_address((int32_t)id);
        const char *symbol_name = symbol_at(symbols, symbol_count, address);
        char fallback[32];
        if (symbol_name == NULL) {
            snprintf(fallback, sizeof fallback, "0x%lx", (unsigned long)address);
            symbol_name = fallback;
        }
        char *shown = display_name(symbol_name);
        char *short_name = without_parameters(shown);
        function_names[id] = intern(shown);
        int measure = !filtered || strcmp(shown, "main") == 0;
        /* evaluate all three so every matching filter entry is marked as used */
        measure |= filter_matches(symbol_name);
        measure |= filter_matches(shown);
        measure |= filter_matches(short_name);
        free(shown);
        free(short_name);
        if (filtered && measure) {
            __xray_patch_function((int32_t)id);
            patched[id] = 1;
            patched_count++;
        }
    }
    if (filtered)
        match_qualified_names(patched);
    free(patched);
    free(symbols);
    __xray_set_handler(on_xray_event);
    if (!filtered) {
        __xray_patch();
        patched_count = function_count;
    }
}

/* ---------------------------------------------------------------------------------------
 * Basic-block counters (SanitizerCoverage trace-pc-guard callbacks)
 * ------------------------------------------------------------------------------------- */

static int counters_enabled;
static uint64_t instrumented_blocks;

void __sanitizer_cov_trace_pc_guard_init(uint32_t *start, uint32_t *stop)
{
    if (start == stop || *start != 0)
        return; /* called again for a module already seen */
    counters_enabled = 1;
    for (uint32_t *guard = start; guard < stop; ++guard)
        *guard = 1;
    instrumented_blocks += (uint64_t)(stop - start);
}

void __sanitizer_cov_pcs_init(const uintptr_t *begin, const uintptr_t *end)
{
    (void)begin;
    (void)end;
}

void __sanitizer_cov_trace_pc_guard(uint32_t *guard)
{
    (void)guard;
    uint64_t *slot = basic_block_slot;
    if (__builtin_expect(slot == NULL, 0)) {
        attach_thread();
        slot = basic_block_slot;
    }
    ++*slot;
}

/* ---------------------------------------------------------------------------------------
 * MPI records
 * ------------------------------------------------------------------------------------- */

static int world_known, world_rank, world_size = 1, aborted;
static uint64_t run_id;

void perfcast_record_mpi(const char *operation, uint64_t elapsed_ns, uint64_t cpu_ns,
                         int comm_size, uint64_t bytes_sent, uint64_t bytes_received)
{
    thread_state *t = this_thread();
    node *n = node_at(t, child_of(t, t->current, operation));
    n->visits++;
    n->inclusive_ns += elapsed_ns;
    n->inclusive_cpu_ns += cpu_ns;
    mpi_stat *stat = n->mpi;
    while (stat != NULL && stat->comm_size != comm_size)
        stat = stat->next;
    if (stat == NULL) {
        stat = checked_calloc(1, sizeof *stat);
        stat->comm_size = comm_size;
        stat->next = n->mpi;
        n->mpi = stat;
    }
    stat->calls++;
    stat->bytes_sent += bytes_sent;
    stat->bytes_received += bytes_received;
}

uint32_t perfcast_mpi_node(const char *operation)
{
    thread_state *t = this_thread();
    return child_of(t, t->current, operation);
}

uint32_t perfcast_current_node(void)
{
    return this_thread()->current;
}

void perfcast_call_path(uint32_t index, char *buffer, size_t capacity)
{
    thread_state *t = this_thread();
    if (capacity == 0)
        return;
    buffer[0] = '\0';
    if (index == 0 || index >= t->node_count)
        return;
    uint32_t depth = 0;
    for (uint32_t i = index; i != 0; i = node_at(t, i)->parent)
        depth++;
    const char **names = checked_calloc(depth, sizeof *names);
    for (uint32_t i = index, d = depth; i != 0; i = node_at(t, i)->parent)
        names[--d] = node_at(t, i)->name;
    size_t used = 0;
    for (uint32_t d = 0; d < depth && used + 1 < capacity; ++d) {
        int written = snprintf(buffer + used, capacity - used, "%s%s", d ? "->" : "", names[d]);
        if (written < 0)
            break;
        used += (size_t)written;
    }
    free(names);
}

void perfcast_set_world(int rank, int ranks, uint64_t id)
{
    world_known = 1;
    world_rank = rank;
    world_size = ranks;
    run_id = id;
}

#ifdef PERFCAST_SMPI
int perfcast_world_rank(void)
{
    return world_known ? world_rank : -1;
}
#endif

uint64_t perfcast_new_run_id(void)
{
    return perfcast_now() ^ ((uint64_t)getpid() << 40);
}

void perfcast_mark_aborted(void)
{
    aborted = 1;
}

/* A program launched by mpirun that never calls MPI_Init still gets one file per rank. */
static int launcher_rank(void)
{
    static const char *const variables[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof variables / sizeof *variables; ++i) {
        const char *value = getenv(variables[i]);
        if (value != NULL && *value != '\0')
            return atoi(value);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The profile file
 * ------------------------------------------------------------------------------------- */

static int make_directories(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return -1;
    for (char *c = copy + 1; *c; ++c) {
        if (*c != '/')
            continue;
        *c = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
            free(copy);
            return -1;
        }
        *c = '/';
    }
    int status = mkdir(copy, 0777) != 0 && errno != EEXIST ? -1 : 0;
    free(copy);
    return status;
}

static int compare_threads(const void *a, const void *b)
{
    const thread_state *x = *(thread_state *const *)a, *y = *(thread_state *const *)b;
    return x->index - y->index;
}

static inline uint64_t difference(uint64_t total, uint64_t part)
{
    return total > part ? total - part : 0;
}

/* One thread's nodes. Frames still open (exit() from below main) are closed at `now`; for
 * CPU time only on the thread writing the profile, the one whose clock `cpu_now` is (other
 * threads should have been joined, and their clocks may be gone). */
static void write_thread(FILE *out, thread_state *t, uint64_t now, uint64_t cpu_now)
{
    uint64_t *inclusive = checked_calloc(t->node_count, sizeof *inclusive);
    uint64_t *children = checked_calloc(t->node_count, sizeof *children);
    uint64_t *inclusive_cpu = checked_calloc(t->node_count, sizeof *inclusive_cpu);
    uint64_t *children_cpu = checked_calloc(t->node_count, sizeof *children_cpu);
    for (uint32_t i = 0; i < t->node_count; ++i) {
        inclusive[i] = node_at(t, i)->inclusive_ns;
        inclusive_cpu[i] = node_at(t, i)->inclusive_cpu_ns;
    }
    for (uint32_t i = 0; i < t->depth; ++i) {
        inclusive[t->stack[i].node] += now - t->stack[i].start;
        if (t == self)
            inclusive_cpu[t->stack[i].node] += difference(cpu_now, t->stack[i].cpu_start);
    }
    for (uint32_t i = 1; i < t->node_count; ++i) {
        children[node_at(t, i)->parent] += inclusive[i];
        children_cpu[node_at(t, i)->parent] += inclusive_cpu[i];
    }
    fprintf(out, "thread %d\n", t->index);
    fprintf(out, "outside %llu\n", (unsigned long long)node_at(t, 0)->basic_blocks);
    for (uint32_t i = 1; i < t->node_count; ++i) {
        node *n = node_at(t, i);
        fprintf(out, "node %u %u %llu %llu %llu %llu %llu %llu %s\n", i, n->parent,
                (unsigned long long)n->visits, (unsigned long long)inclusive[i],
                (unsigned long long)difference(inclusive[i], children[i]),
                (unsigned long long)inclusive_cpu[i],
                (unsigned long long)difference(inclusive_cpu[i], children_cpu[i]),
                (unsigned long long)n->basic_blocks, n->name);
        for (mpi_stat *stat = n->mpi; stat != NULL; stat = stat->next)
            fprintf(out, "mpi %u %d %llu %llu %llu\n", i, stat->comm_size,
                    (unsigned long long)stat->calls, (unsigned long long)stat->bytes_sent,
                    (unsigned long long)stat->bytes_received);
    }
    free(inclusive);
    free(children);
    free(inclusive_cpu);
    free(children_cpu);
}

static void write_profile(void)
{
    if (aborted)
        return;
#ifdef PERFCAST_SMPI
    /* Every rank needs its own copy of this runtime (call-path tree, rank), which SMPI gives
     * only when it loads the program once per rank (smpi/privatization:dlopen, the
     * default). Otherwise the MPI_Init wrapper is never reached and all ranks share one
     * tree: write nothing rather than a profile of mixed ranks. */
    if (!world_known) {
        fprintf(stderr, "perfcast runtime: no profile written: under SMPI every rank needs its "
                        "own copy of the program; run smpirun without "
                        "--cfg=smpi/privatization:no (the default, dlopen, is right)\n");
        return;
    }
#endif
    uint64_t cpu_now = perfcast_cpu_now(), now = perfcast_now();
    int rank = world_known ? world_rank : launcher_rank();
    const char *directory = getenv(PROFILE_DIR_VARIABLE);
    if (directory == NULL || *directory == '\0')
        directory = DEFAULT_PROFILE_DIR;
    if (make_directories(directory) != 0) {
        fprintf(stderr, "perfcast runtime: cannot create the profile directory %s: %s\n",
                directory, strerror(errno));
        return;
    }
    char final_path[4096], temporary[4096], program[4096];
    snprintf(final_path, sizeof final_path, "%s/rank-%d.pcprof", directory, rank);
    snprintf(temporary, sizeof temporary, "%s/.rank-%d.pcprof.%d.tmp", directory, rank,
             (int)getpid());
#ifdef PERFCAST_SMPI
    snprintf(program, sizeof program, "%s", program_file());
#else
    ssize_t length = readlink("/proc/self/exe", program, sizeof program - 1);
    program[length > 0 ? length : 0] = '\0';
#endif
    FILE *out = fopen(temporary, "w");
    if (out == NULL) {
        fprintf(stderr, "perfcast runtime: cannot write %s: %s\n", temporary, strerror(errno));
        return;
    }
    pthread_mutex_lock(&threads_lock);
    thread_state **ordered = checked_calloc(thread_count ? thread_count : 1, sizeof *ordered);
    int count = 0;
    for (thread_state *t = threads; t != NULL; t = t->next)
        ordered[count++] = t;
    qsort(ordered, count, sizeof *ordered, compare_threads);
    fprintf(out, "perfcast-profile %d\n", PROFILE_FORMAT_VERSION);
    fprintf(out, "rank %d\nranks %d\n", rank, world_known ? world_size : 1);
    fprintf(out, "run %016llx\n", (unsigned long long)(world_known ? run_id : perfcast_new_run_id()));
    fprintf(out, "program %s\n", program);
    fprintf(out, "clock %s\n", CLOCK_DESCRIPTION);
    fprintf(out, "cpu-clock %d CLOCK_THREAD_CPUTIME_ID ns\n", cpu_time_enabled);
    fprintf(out, "counters %d %llu\n", counters_enabled, (unsigned long long)instrumented_blocks);
    fprintf(out, "functions %zu %zu %s\n", patched_count, function_count, filter_source);
    for (size_t i = 0; i < filter_count; ++i)
        if (!filter_used[i])
            fprintf(out, "unmatched %s\n", filter[i]);
    fprintf(out, "threads %d\n", count);
    for (int i = 0; i < count; ++i)
        write_thread(out, ordered[i], now, cpu_now);
    fprintf(out, "end\n");
    pthread_mutex_unlock(&threads_lock);
    free(ordered);
    int failed = ferror(out);
    failed |= fclose(out) != 0;
    if (failed || rename(temporary, final_path) != 0) {
        fprintf(stderr, "perfcast runtime: cannot write the profile %s: %s\n", final_path,
                strerror(errno));
        unlink(temporary);
    }
}

/* PERFCAST_CPU_TIME: "1" measures CPU time, "0" or unset does not; anything else stops
 * the program, as a misspelt PERFCAST_FILTER does, rather than measure what was not meant. */
static void read_cpu_time_setting(void)
{
    const char *value = getenv(CPU_TIME_VARIABLE);
    if (value == NULL || *value == '\0' || strcmp(value, "0") == 0)
        return;
    if (strcmp(value, "1") != 0) {
        fprintf(stderr, "perfcast runtime: %s=%s: set it to 1 (measure CPU time) or 0\n",
                CPU_TIME_VARIABLE, value);
        exit(2);
    }
    cpu_time_enabled = 1;
}

/* Before C++ static initialisers (priority 101 < default), after XRay's own pre-init. */
__attribute__((constructor(101))) static void perfcast_start(void)
{
    read_cpu_time_setting();
#ifdef PERFCAST_SMPI
    /* clang-16's XRay runtime starts from .preinit_array, which a shared object cannot
     * have; perfcast build --smpi links a copy without it, so it is started here. */
    __xray_init();
#endif
    instrument_functions();
    atexit(write_profile);
}
