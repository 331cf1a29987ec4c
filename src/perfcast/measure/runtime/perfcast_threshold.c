/* perfcast threshold iteration rule (dPerf, paper section IV-A) for traced runs.
 *
 * perfcast/measure/threshold.py rewrites a loop whose trip count depends on input
 * parameters into
 *
 *     { perfcast_threshold_enter(S); for (...) { if (perfcast_threshold_iterate(S)) { BODY } }
 *       perfcast_threshold_leave(S); }
 *
 * The loop header still runs every iteration, so the program itself counts n exactly; only
 * the body is skipped once the time per iteration is stable. Skipped iterations are credited
 * at the mean time of the iterations that ran (t_th / th per iteration, the paper's rule) to
 * the trace's current compute block through perfcast_trace_credit, which is a WEAK reference:
 * without the trace runtime linked the program still runs and only this file's statistics
 * are written.
 *
 * Units: iterations are timed one by one, or, where one is shorter than a clock read over
 * epsilon (about 0.5 us here), in units of the smallest power of two of them that is not
 * (widen_units): an element loop of LULESH or a row of a stencil is timed per 16 or 64
 * iterations, so the clock costs at most epsilon of what it times. A loop whose MAX_CHUNK
 * iterations are still too short, or whose entries are too short for WINDOW units
 * SHORT_ENTRIES times in a row (it could skip nothing, and would only pay clock reads),
 * runs untimed and in full from then on.
 *
 * Stability: after PERFCAST_THRESHOLD_MIN units (default 8) that took together at least
 * PERFCAST_THRESHOLD_MIN_SECONDS (default 0.01), once the time per iteration of the last
 * WINDOW units is within PERFCAST_THRESHOLD_EPSILON (relative, default 0.05) of the mean so
 * far, the remaining iterations of this entry are skipped. The time floor keeps a few units
 * that one interruption or frequency change distorts from standing for thousands (with
 * 8 iterations of 50 us, errors of 12 % were seen on a loaded machine); a loop cheaper than
 * the floor in total is cheap to run in full anyway. Each entry of the loop is judged on its
 * own iterations, because one entry's trip count and per-iteration cost need not be the
 * next one's; but a loop entered once per time step (a sweep over rows between two halo
 * exchanges) rarely reaches the floor within one entry. So the loop as a whole also keeps a
 * steady-state mean: the iterations of every entry after its first WINDOW, which are the
 * paper's prefetching effect (measured on the stencil at 2048 x 2048: the first rows of a
 * sweep cost 1.5x the average row, and a mean over them over-credited the skipped rows by
 * 30 %). Once that mean rests on the floor, a later entry runs until the mean of its last
 * WINDOW iterations agrees with it within epsilon, that is until its own warm-up is over,
 * and the rest of its bodies are credited at the steady-state mean. Only entries that ran
 * long by themselves feed that mean (an entry cut short by it would feed back its early,
 * slower iterations), and every RESAMPLE_EVERY-th entry runs long to keep it current. An entry whose
 * iterations never agree (another size) runs on until it is stable by itself, or in full.
 * Time credited by rule loops nested inside an iteration (through calls) counts
 * in that iteration's time, so an outer rule loop extrapolates the full cost of its body.
 *
 * PERFCAST_THRESHOLD=0 turns the rule off at run time: every iteration runs and the same
 * statistics are written, so the same binary gives the full traced run to compare with.
 * PERFCAST_TRACE_CLOCK=cpu times with the thread's CPU clock instead of CLOCK_MONOTONIC.
 *
 * Under SimGrid SMPI (`perfcast build --smpi --trace --threshold`, compiled with
 * PERFCAST_SMPI) the clock is always the thread's CPU clock, which is what SMPI charges a
 * burst with (the trace writer converts the credit to flops at smpi/host-speed), and the
 * rank is the one this copy of the program joined MPI_COMM_WORLD as: all ranks share one
 * process and its environment. A rule loop has no MPI call in its body (threshold.py leaves
 * those alone), so no other rank runs on the thread while an iteration is timed.
 *
 * At exit one file per process, $PERFCAST_TRACE_DIR (default perfcast-trace)/threshold-<rank>.tsv,
 * is written under a temporary name and renamed, so a rank that dies leaves no file that
 * reads as complete. Single-threaded use is assumed (the traced MPI ranks): a rule loop
 * entered from several threads at once is not supported.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 4
/* Every RESAMPLE_EVERY-th entry of a loop is not cut short by the loop's steady-state mean,
 * so that the mean follows a program whose iterations get faster or slower as it runs (the
 * first sweeps of the stencil at 2048 x 2048 cost 1.25x the later ones: a mean taken from
 * them alone over-credited every later entry by 20 %); it costs a sixteenth of the saving. */
#define RESAMPLE_EVERY 16
/* Entries of a loop that pay first touches of memory: a page is mapped at its first read (the
 * shared zero page of calloc'd memory) and copied at its first write, so a double-buffered
 * sweep (read u, write unew, swap) faults in its first two passes. Measured on the stencil at
 * 2048 x 2048, where the rule had also shortened the initialisation loop: a steady-state mean
 * that included them over-credited every later sweep by 30 %. */
#define WARMUP_ENTRIES 2
/* Clock reads timed at start-up to learn what timing one iteration costs. */
#define CLOCK_PROBES 1000
#define DEFAULT_MIN_ITERATIONS 8
#define DEFAULT_EPSILON 0.05
#define DEFAULT_MIN_SECONDS 0.01
#define DEFAULT_TRACE_DIR "perfcast-trace"
/* The most iterations one timed unit may take: a loop whose 65536 iterations are still
 * shorter than a clock read over epsilon is run in full and untimed. */
#define MAX_CHUNK 65536
/* Entries in a row too short for WINDOW units after which a loop runs untimed (leave()). */
#define SHORT_ENTRIES 64

/* The rewritten source declares the same layout (threshold.py's PRELUDE): one static site
 * per rewritten loop, `slot` 0 until the loop is first entered. */
struct perfcast_threshold_site {
    const char *file;
    unsigned line;
    unsigned slot;
};

extern void perfcast_trace_credit(uint64_t ns) __attribute__((weak));
#ifdef PERFCAST_SMPI
extern int perfcast_world_rank(void); /* perfcast_rt.c, built with PERFCAST_SMPI too */
#endif

struct loop_state {
    struct perfcast_threshold_site *site;
    unsigned depth;          /* > 1: re-entered (recursion); inner entries run in full */
    int stable;              /* this entry skips its remaining bodies */
    int in_iteration;        /* an iteration is being timed */
    uint64_t entered_at;     /* clock at enter */
    uint64_t iteration_at;   /* clock at the start of the iteration in progress */
    uint64_t credit_mark;    /* credited_total at the start of that iteration */
    uint64_t run;            /* iterations of this entry whose body ran, timed */
    uint64_t units;          /* the timed units they form (chunk iterations each) */
    uint64_t unit_run;       /* iterations in the unit in progress */
    uint64_t skipped;        /* iterations of this entry whose body was skipped */
    uint64_t sum_ns;         /* their total time */
    double window[WINDOW];   /* time per iteration of the last WINDOW units */
    int stable_by_loop;      /* this entry's stability came from the loop's mean */
    uint64_t warmup_ns;      /* the time of this entry's first WINDOW units */
    uint64_t warmup_run;     /* and their iterations */
    uint64_t untimed;        /* iterations of this entry run without timing (too_fine) */
    uint64_t chunk;          /* iterations per timed unit, for the loop (0: not yet set) */
    int too_fine;            /* the loop runs in full and untimed from now on */
    uint64_t short_entries;  /* entries in a row too short to skip anything */
    /* totals over all entries, written at exit */
    uint64_t entries, total_run, total_skipped, measured_ns, credited_ns;
    /* the steady-state mean later entries are compared with and credited at: the
     * iterations of every entry after its first WINDOW */
    uint64_t steady_ns, steady_run;
};

static struct loop_state *loops;
static unsigned loop_count, loop_capacity;
static int configured, rule_on = 1;
static clockid_t clock_id = CLOCK_MONOTONIC;
static double epsilon = DEFAULT_EPSILON;
static uint64_t min_iterations = DEFAULT_MIN_ITERATIONS;
static uint64_t min_ns = (uint64_t)(DEFAULT_MIN_SECONDS * 1e9);
static uint64_t credited_total;
static double min_iteration_ns; /* shorter iterations are too_fine: see configure() */

static void write_stats(void);

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void configure(void) {
    configured = 1;
    const char *value = getenv("PERFCAST_THRESHOLD");
    rule_on = !(value && strcmp(value, "0") == 0);
    value = getenv("PERFCAST_TRACE_CLOCK");
    if (value && strcmp(value, "cpu") == 0) clock_id = CLOCK_THREAD_CPUTIME_ID;
#ifdef PERFCAST_SMPI
    clock_id = CLOCK_THREAD_CPUTIME_ID;
#endif
    value = getenv("PERFCAST_THRESHOLD_EPSILON");
    if (value && *value) {
        char *end;
        double parsed = strtod(value, &end);
        if (*end == '\0' && parsed > 0 && parsed < 1) {
            epsilon = parsed;
        } else {
            fprintf(stderr, "perfcast: PERFCAST_THRESHOLD_EPSILON=%s is not a number between 0 "
                            "and 1; using %g\n", value, DEFAULT_EPSILON);
        }
    }
    value = getenv("PERFCAST_THRESHOLD_MIN_SECONDS");
    if (value && *value) {
        char *end;
        double parsed = strtod(value, &end);
        if (*end == '\0' && parsed >= 0 && parsed < 1e6) {
            min_ns = (uint64_t)(parsed * 1e9);
        } else {
            fprintf(stderr, "perfcast: PERFCAST_THRESHOLD_MIN_SECONDS=%s is not a number of "
                            "seconds; using %g\n", value, DEFAULT_MIN_SECONDS);
        }
    }
    value = getenv("PERFCAST_THRESHOLD_MIN");
    if (value && *value) {
        char *end;
        unsigned long long parsed = strtoull(value, &end, 10);
        if (*end == '\0' && parsed >= WINDOW) {
            min_iterations = parsed;
        } else {
            fprintf(stderr, "perfcast: PERFCAST_THRESHOLD_MIN=%s is not a whole number >= %d; "
                            "using %d\n", value, WINDOW, DEFAULT_MIN_ITERATIONS);
        }
    }
    /* Timing an iteration adds a clock read to it. Where that read is more than epsilon of
     * the iteration, the mean the skipped iterations would be credited at is off by more
     * than the rule's own tolerance (the stencil's 64-element rows, about 40 ns: +30 %), so
     * such a loop is left to run untimed and in full. */
    uint64_t probe_start = now_ns();
    for (int i = 0; i < CLOCK_PROBES; i++) (void)now_ns();
    min_iteration_ns = (double)(now_ns() - probe_start) / CLOCK_PROBES / epsilon;
    atexit(write_stats);
}

static struct loop_state *state_of(struct perfcast_threshold_site *site) {
    if (site->slot) return &loops[site->slot - 1];
    if (!configured) configure();
    if (loop_count == loop_capacity) {
        unsigned capacity = loop_capacity ? 2 * loop_capacity : 64;
        struct loop_state *grown = realloc(loops, capacity * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "perfcast: out of memory for threshold loop statistics\n");
            abort();
        }
        loops = grown;
        loop_capacity = capacity;
    }
    struct loop_state *state = &loops[loop_count++];
    memset(state, 0, sizeof *state);
    state->site = site;
    site->slot = loop_count;
    return state;
}

void perfcast_threshold_enter(struct perfcast_threshold_site *site) {
    struct loop_state *state = state_of(site);
    if (++state->depth > 1) return;
    state->entries++;
    state->stable = state->in_iteration = state->stable_by_loop = 0;
    state->run = state->units = state->unit_run = state->skipped = state->sum_ns = 0;
    state->warmup_ns = state->warmup_run = state->untimed = 0;
    if (!state->chunk) state->chunk = 1;
    if (state->too_fine) return; /* runs untimed: no clock read at all */
    state->entered_at = state->iteration_at = now_ns();
    state->credit_mark = credited_total;
}

/* The unit of iterations that has just ended: its time, credits of nested rule loops
 * included, and its time per iteration in the window. */
static void finish_unit(struct loop_state *state, uint64_t now) {
    uint64_t elapsed = now - state->iteration_at + (credited_total - state->credit_mark);
    state->window[state->units % WINDOW] = (double)elapsed / (double)state->unit_run;
    state->sum_ns += elapsed;
    if (state->units < WINDOW) {
        state->warmup_ns += elapsed;
        state->warmup_run += state->unit_run;
    }
    state->run += state->unit_run;
    state->units++;
    state->unit_run = 0;
}

/* Iterations shorter than a clock read over epsilon are timed in units of several: the
 * smallest power of two whose unit lasts min_iteration_ns (LULESH's element loops, about
 * 100 ns an iteration: units of 16 to 64). The entry's units so far were distorted by their
 * clock reads, so its statistics start again. */
static void widen_units(struct loop_state *state) {
    double per_iteration = (double)state->sum_ns / (double)state->run;
    uint64_t chunk = state->chunk;
    while (chunk <= MAX_CHUNK && (double)chunk * per_iteration < min_iteration_ns) chunk *= 2;
    if (chunk > MAX_CHUNK) {
        state->too_fine = 1; /* for good: every entry of this loop runs untimed from now on */
        return;
    }
    state->chunk = chunk;
    state->untimed += state->run;
    state->run = state->units = state->sum_ns = state->warmup_ns = state->warmup_run = 0;
}

static double recent_mean(const struct loop_state *state) {
    double recent = 0;
    for (int i = 0; i < WINDOW; i++) recent += state->window[i];
    return recent / WINDOW;
}

int perfcast_threshold_iterate(struct perfcast_threshold_site *site) {
    struct loop_state *state = &loops[site->slot - 1];
    if (state->depth > 1) return 1;
    if (state->stable) {
        state->skipped++;
        return 0;
    }
    if (!rule_on) {
        state->run++;
        return 1;
    }
    if (state->too_fine) {
        state->untimed++;
        return 1;
    }
    if (state->in_iteration && state->unit_run < state->chunk) {
        state->unit_run++; /* inside a unit: the body runs, no clock is read */
        return 1;
    }
    uint64_t now = now_ns();
    if (state->in_iteration) finish_unit(state, now); /* the previous unit ends here */
    state->in_iteration = 0;
    if (state->units >= min_iterations &&
        (double)state->sum_ns / (double)state->run * (double)state->chunk < min_iteration_ns) {
        widen_units(state);
        if (state->too_fine) {
            state->untimed++;
            return 1;
        }
    }
    if (state->units >= min_iterations && state->sum_ns >= min_ns) {
        double mean = (double)state->sum_ns / (double)state->run;
        double recent = recent_mean(state);
        if (mean > 0 && recent > (1 - epsilon) * mean && recent < (1 + epsilon) * mean) {
            state->stable = 1;
            state->skipped++;
            return 0;
        }
    } else if (state->units >= WINDOW && state->steady_run >= min_iterations &&
               state->steady_ns >= min_ns && state->entries % RESAMPLE_EVERY != 0) {
        double recent = recent_mean(state);
        double loop_mean = (double)state->steady_ns / (double)state->steady_run;
        if (recent > (1 - epsilon) * loop_mean && recent < (1 + epsilon) * loop_mean) {
            state->stable = state->stable_by_loop = 1;
            state->skipped++;
            return 0;
        }
    }
    state->in_iteration = 1;
    state->unit_run = 1;
    state->iteration_at = now;
    state->credit_mark = credited_total;
    return 1;
}

void perfcast_threshold_leave(struct perfcast_threshold_site *site) {
    struct loop_state *state = &loops[site->slot - 1];
    if (--state->depth > 0) return;
    if (state->too_fine) {
        state->total_run += state->run + state->untimed;
        return;
    }
    uint64_t now = now_ns();
    if (state->in_iteration)
        finish_unit(state, now); /* the last unit that ran ends at the loop's exit */
    uint64_t credit = 0;
    if (state->skipped && state->stable_by_loop)
        credit = (uint64_t)((double)state->steady_ns / (double)state->steady_run *
                            (double)state->skipped);
    else if (state->skipped && state->run)
        credit = (uint64_t)((double)state->sum_ns / (double)state->run * (double)state->skipped);
    /* only entries that ran long by themselves (in full, or until stable on their own)
     * inform the steady-state mean: an entry cut short by it would feed its own early,
     * slower iterations back into it. Nor do the loop's first WARMUP_ENTRIES entries: they
     * pay the program's first touches of its memory, which later entries never do. */
    if (rule_on && state->units > WINDOW && !state->stable_by_loop &&
        state->entries > WARMUP_ENTRIES) {
        state->steady_ns += state->sum_ns - state->warmup_ns;
        state->steady_run += state->run - state->warmup_run;
    }
    if (credit) {
        credited_total += credit;
        if (perfcast_trace_credit) perfcast_trace_credit(credit);
    }
    /* An entry too short for WINDOW units can skip nothing, by itself or by the loop's
     * mean; a loop whose entries all are (an inner loop over the dozen atoms of a link cell,
     * entered millions of times) only pays clock reads: after SHORT_ENTRIES of them in a
     * row it runs untimed for good, its entries and exits without a clock read. */
    if (rule_on && state->units < WINDOW && !state->skipped)
        state->short_entries++;
    else
        state->short_entries = 0;
    if (state->short_entries >= SHORT_ENTRIES) state->too_fine = 1;
    state->total_run += state->run + state->untimed;
    state->total_skipped += state->skipped;
    state->measured_ns += now - state->entered_at;
    state->credited_ns += credit;
}

static const char *rank_text(void) {
#ifdef PERFCAST_SMPI
    static char text[16];
    snprintf(text, sizeof text, "%d", perfcast_world_rank() < 0 ? 0 : perfcast_world_rank());
    return text;
#else
    static const char *const variables[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof variables / sizeof *variables; i++) {
        const char *value = getenv(variables[i]);
        if (value && *value && strspn(value, "0123456789") == strlen(value)) return value;
    }
    return "0";
#endif
}

static void write_stats(void) {
    if (!loop_count) return;
    const char *dir = getenv("PERFCAST_TRACE_DIR");
    if (!dir || !*dir) dir = DEFAULT_TRACE_DIR;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "perfcast: cannot create %s for the threshold statistics: %s\n", dir,
                strerror(errno));
        return;
    }
    char final_path[4096], temporary[4200];
    snprintf(final_path, sizeof final_path, "%s/threshold-%s.tsv", dir, rank_text());
    snprintf(temporary, sizeof temporary, "%s.tmp.%ld", final_path, (long)getpid());
    FILE *out = fopen(temporary, "w");
    if (!out) {
        fprintf(stderr, "perfcast: cannot write %s: %s\n", temporary, strerror(errno));
        return;
    }
    fprintf(out, "loop\tfile\tline\trule\tentries\titerations_run\titerations_skipped\t"
                 "seconds_measured\tseconds_credited\n");
    for (unsigned i = 0; i < loop_count; i++) {
        struct loop_state *s = &loops[i];
        fprintf(out, "%u\t%s\t%u\t%s\t%llu\t%llu\t%llu\t%.9f\t%.9f\n", i + 1, s->site->file,
                s->site->line, rule_on ? "on" : "off", (unsigned long long)s->entries,
                (unsigned long long)s->total_run, (unsigned long long)s->total_skipped,
                s->measured_ns / 1e9, s->credited_ns / 1e9);
    }
    int failed = ferror(out);
    failed |= fclose(out) != 0;
    if (failed || rename(temporary, final_path) != 0) {
        fprintf(stderr, "perfcast: cannot write %s\n", final_path);
        unlink(temporary);
    }
}
