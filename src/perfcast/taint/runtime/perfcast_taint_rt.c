/* perfcast taint runtime: what the source rewriter's instrumentation calls.
 *
 * Compiled WITHOUT -fsanitize=dataflow and linked into a DataFlowSanitizer binary. The ABI
 * list generated beside it marks every function here as uninstrumented; those that need
 * the taint label of an argument are `custom`, so the instrumented caller passes the labels
 * explicitly (`__dfsw_` wrappers below), the others are `discard`.
 *
 * What it records, per calling context (a node of a shadow call tree keyed by function id,
 * the caller's innermost loop at the call and the call site, which the instrumented caller
 * announces with __perfcast_call just before the call; see perfcast_prelude.h):
 *   - per condition site of the function: the union of the labels seen, how often it was
 *     evaluated and how often it was true. The instrumented code keeps these in its frame
 *     without calling here (a call per loop test was most of the taint run's cost); the
 *     frame hands them over when it ends (__perfcast_leave) or, still active, at exit;
 *   - per MPI routine called from it (through the generated MPI wrappers): the union of the
 *     labels of the routine's count arguments and the number of calls.
 * At exit it writes one text file per process into $PERFCAST_TAINT_OUT (see write_records).
 *
 * Parameters: a label is one bit (DataFlowSanitizer has 8). $PERFCAST_TAINT_PARAMS lists the
 * names tracked in this run, in bit order; with $PERFCAST_TAINT_DISCOVER=1 names registered
 * at run time that are not listed take the next free bit. Names that find no bit are written
 * as `untracked` so the driver can run them in a further batch.
 *
 * Single-threaded programs only: the call tree is shared and not locked.
 */
#define _GNU_SOURCE
#include <sanitizer/dfsan_interface.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PC_MAX_LABELS 8
#define PC_NAME_MAX 64

typedef struct {
  uint8_t labels;
  uint64_t count;
  uint64_t taken;
} pc_site;

typedef struct pc_mpi_record {
  int routine;
  int call_loop;
  int call_site;
  uint8_t labels;
  uint64_t count;
  struct pc_mpi_record *next;
} pc_mpi_record;

typedef struct {
  int parent;
  int fid;
  int call_loop;
  int call_site;
  int nsites;
  int recursive;
  int first_child;
  int next_sibling;
  pc_site *sites;
  pc_mpi_record *mpi;
} pc_node;

/* The records of one activation's condition sites, in the instrumented frame
 * (__pc_site in perfcast_prelude.h): the union of the labels is the label of `labels`. */
typedef struct {
  unsigned long long labels;
  unsigned long long count;
  unsigned long long taken;
} pc_local_site;

typedef struct {
  int node;
  int cur_loop;
  int pending_base; /* announced calls below this index belong to callers */
  pc_local_site *sites;
} pc_frame;

/* Written by the instrumented code (perfcast_prelude.h). */
unsigned long long __perfcast_control;
typedef struct {
  int fid;
  int site;
} pc_pending_call;
pc_pending_call __perfcast_pending[256]; /* __PC_MAX_PENDING in perfcast_prelude.h */
int __perfcast_npending;

#define PC_LIBRARY_CALLEE (-2)

static pc_node *nodes;
static int n_nodes, cap_nodes;
static pc_frame *frames;
static int depth, cap_frames;
static int initialised;

static char param_names[PC_MAX_LABELS][PC_NAME_MAX];
static int n_params;
static int discover;
static char untracked[64][PC_NAME_MAX];
static int n_untracked;
static char missing[64][PC_NAME_MAX];
static int n_missing;

/* Per label bit, the conversion routines (atoi, sscanf, ...) that read bytes carrying it:
 * where a parameter's label was last seen when it reaches no condition. */
static const char *read_by[PC_MAX_LABELS][8];

static const char *mpi_names[256];
static int n_mpi_names;

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n);
  if (!q) {
    fprintf(stderr, "perfcast taint runtime: out of memory\n");
    abort();
  }
  return q;
}

static int new_node(int parent, int fid, int call_loop, int call_site, int nsites) {
  if (n_nodes == cap_nodes) {
    cap_nodes = cap_nodes ? 2 * cap_nodes : 256;
    nodes = xrealloc(nodes, cap_nodes * sizeof(pc_node));
  }
  pc_node *n = &nodes[n_nodes];
  memset(n, 0, sizeof *n);
  n->parent = parent;
  n->fid = fid;
  n->call_loop = call_loop;
  n->call_site = call_site;
  n->nsites = nsites;
  n->first_child = -1;
  n->next_sibling = -1;
  n->sites = nsites ? calloc(nsites, sizeof(pc_site)) : NULL;
  if (parent >= 0) {
    n->next_sibling = nodes[parent].first_child;
    nodes[parent].first_child = n_nodes;
  }
  return n_nodes++;
}

static void push_frame(int node, pc_local_site *sites) {
  if (depth == cap_frames) {
    cap_frames = cap_frames ? 2 * cap_frames : 64;
    frames = xrealloc(frames, cap_frames * sizeof(pc_frame));
  }
  frames[depth].node = node;
  frames[depth].cur_loop = -1;
  frames[depth].pending_base = __perfcast_npending;
  frames[depth].sites = sites;
  depth++;
}

/* Add what a frame's condition sites saw to its calling context, and start them afresh. */
static void flush_sites(pc_frame *f) {
  pc_node *n = &nodes[f->node];
  if (!f->sites) return;
  for (int s = 0; s < n->nsites; s++) {
    pc_local_site *local = &f->sites[s];
    if (!local->count) continue;
    n->sites[s].labels |= dfsan_read_label(&local->labels, sizeof local->labels);
    n->sites[s].count += local->count;
    n->sites[s].taken += local->taken;
    memset(local, 0, sizeof *local);
    dfsan_set_label(0, local, sizeof *local);
  }
}

static void write_records(void);

static void load_params(void) {
  const char *list = getenv("PERFCAST_TAINT_PARAMS");
  const char *disc = getenv("PERFCAST_TAINT_DISCOVER");
  discover = disc && strcmp(disc, "1") == 0;
  if (!list) return;
  const char *p = list;
  while (*p && n_params < PC_MAX_LABELS) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 0 && len < PC_NAME_MAX) {
      memcpy(param_names[n_params], p, len);
      param_names[n_params][len] = 0;
      n_params++;
    }
    if (!end) break;
    p = end + 1;
  }
}

/* Out of line and cold: the entry points only test `initialised`, which keeps their fast
 * path free of a call (it was a fifth of the runtime's instructions on LULESH, measured with
 * callgrind, when the condition sinks were calls). */
static __attribute__((noinline, cold)) void initialise(void) {
  initialised = 1;
  load_params();
  new_node(-1, -1, -1, -1, 0); /* root: the program before main's frame */
  push_frame(0, NULL);
  atexit(write_records);
}

static inline void init(void) {
  if (__builtin_expect(!initialised, 0)) initialise();
}

static pc_frame *top(void) {
  init();
  return &frames[depth - 1];
}

/* ---- shadow call stack ------------------------------------------------------------------ */

/* The call site the caller announced for a call of `callee`, or -1: a call from code that
 * announces nothing (a callback from a library, a virtual call) leaves the announcements of
 * the caller in place. */
static int take_call_site(pc_frame *caller, int callee) {
  int n = __perfcast_npending;
  if (n <= caller->pending_base || __perfcast_pending[n - 1].fid != callee) return -1;
  __perfcast_npending = n - 1;
  return __perfcast_pending[n - 1].site;
}

void __perfcast_enter(int fid, int nsites, pc_local_site *sites) {
  pc_frame *caller = top();
  int parent = caller->node;
  int site = take_call_site(caller, fid);
  for (int c = nodes[parent].first_child; c >= 0; c = nodes[c].next_sibling) {
    if (nodes[c].fid == fid && nodes[c].call_loop == caller->cur_loop &&
        nodes[c].call_site == site) {
      push_frame(c, sites);
      return;
    }
  }
  /* Recursion: reuse the ancestor's node so the tree stays finite. */
  for (int d = depth - 1; d > 0; d--) {
    int a = frames[d].node;
    if (nodes[a].fid == fid) {
      nodes[a].recursive = 1;
      push_frame(a, sites);
      return;
    }
  }
  push_frame(new_node(parent, fid, caller->cur_loop, site, nsites), sites);
}

/* The frame's site records go to its calling context. Announcements the leaving function
 * made and never entered (a call that threw) die with it. */
void __perfcast_leave(int *frame_variable) {
  (void)frame_variable;
  if (depth > 1) {
    depth--;
    flush_sites(&frames[depth]);
    __perfcast_npending = frames[depth].pending_base;
  }
}

void __perfcast_loop_begin(int loop) { top()->cur_loop = loop; }

void __perfcast_loop_end(int parent_loop) { top()->cur_loop = parent_loop; }

/* ---- control-flow taint of aggregates --------------------------------------------------- */

/* Control-flow taint of an object the instrumented code cannot or into inline (a struct, a
 * long double, an object a library call modifies): every byte gains the labels of the
 * control carrier. With control-flow taint off (`perfcast taint --no-control-flow`: data
 * flow only, as tools without control-flow taint see the program) the program is built
 * with PERFCAST_NO_CONTROL_FLOW and its carriers hold no labels. Scalars never come here:
 * or-ing the carrier into the stored value inline was the largest cut of the taint run's
 * cost (src/perfcast/taint/README.md). */
void __dfsw___perfcast_flow(void *addr, unsigned long size, unsigned char control,
                            dfsan_label addr_label, dfsan_label size_label,
                            dfsan_label control_label) {
  (void)control;
  (void)addr_label;
  (void)size_label;
  if (control_label && addr) dfsan_add_label(control_label, addr, size);
}

/* ---- parameters -------------------------------------------------------------------------- */

static int bit_of(const char *name) {
  for (int i = 0; i < n_params; i++)
    if (strcmp(param_names[i], name) == 0) return i;
  if (discover && n_params < PC_MAX_LABELS && strlen(name) < PC_NAME_MAX) {
    strcpy(param_names[n_params], name);
    return n_params++;
  }
  for (int i = 0; i < n_untracked; i++)
    if (strcmp(untracked[i], name) == 0) return -1;
  if (n_untracked < 64 && strlen(name) < PC_NAME_MAX) strcpy(untracked[n_untracked++], name);
  return -1;
}

/* Registering a variable makes it that parameter: its labels are replaced, not added to, so
 * `ranks` computed from MPI_Comm_size and registered as `ranks` carries `ranks`, not `p` too.
 * A parameter this run does not track (another batch's) leaves the variable unlabelled. */
void __perfcast_register(void *addr, unsigned long size, const char *name) {
  init();
  int bit = bit_of(name);
  dfsan_set_label(bit >= 0 ? (dfsan_label)(1u << bit) : 0, addr, size);
}

static void note_missing(const char *name) {
  if (n_missing < 64 && strlen(name) < PC_NAME_MAX) strcpy(missing[n_missing++], name);
}

/* $PERFCAST_TAINT_ARGV: "name:pos:N;name:flag:-s;..." -- mark the bytes of the command-line
 * argument at position N, or the value of flag -s (`-s V`, `-s=V`), as parameter `name`. */
void __perfcast_argv(int argc, char **argv) {
  init();
  const char *spec = getenv("PERFCAST_TAINT_ARGV");
  if (!spec || !*spec) return;
  char *copy = strdup(spec);
  char *save = NULL;
  for (char *entry = strtok_r(copy, ";", &save); entry; entry = strtok_r(NULL, ";", &save)) {
    char *kind = strchr(entry, ':');
    if (!kind) continue;
    *kind++ = 0;
    char *where = strchr(kind, ':');
    if (!where) continue;
    *where++ = 0;
    char *value = NULL;
    if (strcmp(kind, "pos") == 0) {
      int pos = atoi(where);
      if (pos > 0 && pos < argc) value = argv[pos];
    } else if (strcmp(kind, "flag") == 0) {
      size_t len = strlen(where);
      for (int i = 1; i < argc && !value; i++) {
        if (strcmp(argv[i], where) == 0 && i + 1 < argc)
          value = argv[i + 1];
        else if (strncmp(argv[i], where, len) == 0 && argv[i][len] == '=')
          value = argv[i] + len + 1;
      }
    }
    if (value)
      __perfcast_register(value, strlen(value) + 1, entry);
    else
      note_missing(entry);
  }
  free(copy);
}

/* Note that `routine` read bytes labelled `label` (see read_by). */
static void note_read(dfsan_label label, const char *routine) {
  for (int bit = 0; bit < PC_MAX_LABELS; bit++) {
    if (!(label & (1u << bit))) continue;
    for (int i = 0; i < 8; i++) {
      if (read_by[bit][i] == routine) break;
      if (!read_by[bit][i]) {
        read_by[bit][i] = routine;
        break;
      }
    }
  }
}

/* The labels of the `n` bytes at `s` a converter consumed, noted as read by `routine`. */
static dfsan_label consumed(const char *s, size_t n, const char *routine) {
  dfsan_label label = dfsan_read_label(s, n);
  note_read(label, routine);
  return label;
}

/* The same for the C++ part of the runtime (perfcast_taint_stdlib.cc: std::istream >>);
 * `routine` must be a string literal (read_by keeps the pointer). */
dfsan_label __perfcast_consumed(const void *s, size_t n, const char *routine) {
  return consumed(s, n, routine);
}

/* libc's converters are uninstrumented: give their result the labels of the digits read.
 * (strtol, strtod and their kin have DataFlowSanitizer's own wrappers.) */
int __dfsw_atoi(const char *s, dfsan_label s_label, dfsan_label *ret_label) {
  (void)s_label;
  char *end;
  long v = strtol(s, &end, 10);
  *ret_label = consumed(s, (size_t)(end - s), "atoi");
  return (int)v;
}

long __dfsw_atol(const char *s, dfsan_label s_label, dfsan_label *ret_label) {
  (void)s_label;
  char *end;
  long v = strtol(s, &end, 10);
  *ret_label = consumed(s, (size_t)(end - s), "atol");
  return v;
}

long long __dfsw_atoll(const char *s, dfsan_label s_label, dfsan_label *ret_label) {
  (void)s_label;
  char *end;
  long long v = strtoll(s, &end, 10);
  *ret_label = consumed(s, (size_t)(end - s), "atoll");
  return v;
}

double __dfsw_atof(const char *s, dfsan_label s_label, dfsan_label *ret_label) {
  (void)s_label;
  char *end;
  double v = strtod(s, &end);
  *ret_label = consumed(s, (size_t)(end - s), "atof");
  return v;
}

/* One directive of a scanf format: the text up to and including one conversion. */
typedef struct {
  const char *end;  /* just past the conversion (or the format's end) */
  int assigns;      /* the conversion stores through a pointer argument */
  size_t size;      /* bytes it stores: 0 for strings, whose length is read after */
  int supported;    /* 0: a form this wrapper does not label (%m, %1$d, %n) */
} pc_directive;

static pc_directive next_directive(const char *f) {
  pc_directive d = {f, 0, 0, 1};
  while (*f && !(f[0] == '%' && f[1] != '%')) f += (f[0] == '%') ? 2 : 1;
  if (!*f) {
    d.end = f;
    return d;
  }
  f++;
  int suppress = *f == '*';
  if (suppress) f++;
  size_t width = 0;
  while (*f >= '0' && *f <= '9') width = 10 * width + (size_t)(*f++ - '0');
  if (*f == '$' || *f == 'm') d.supported = 0;
  int longs = 0, shorts = 0, big = 0;
  for (;; f++) {
    if (*f == 'l') longs++;
    else if (*f == 'h') shorts++;
    else if (*f == 'L' || *f == 'q' || *f == 'j' || *f == 'z' || *f == 't') big = 1;
    else break;
  }
  char c = *f ? *f++ : 0;
  if (c == '[') {
    if (*f == '^') f++;
    if (*f == ']') f++;
    while (*f && *f != ']') f++;
    if (*f) f++;
  }
  d.end = f;
  d.assigns = !suppress && c != 0;
  if (c == 'n') d.supported = 0; /* the program's own %n would take the replay's pointer */
  if (c == 'd' || c == 'i' || c == 'u' || c == 'o' || c == 'x' || c == 'X')
    d.size = big || longs ? 8 : shorts == 2 ? 1 : shorts ? 2 : 4;
  else if (c == 'f' || c == 'e' || c == 'g' || c == 'a' || c == 'E' || c == 'G' || c == 'A')
    d.size = big ? sizeof(long double) : longs ? 8 : 4;
  else if (c == 'p')
    d.size = sizeof(void *);
  else if (c == 'c')
    d.size = width ? width : 1;
  else if (c != 's' && c != '[')
    d.assigns = 0;
  return d;
}

/* sscanf is uninstrumented, so what it stores carried no label: HPCG reads its flags with
 * sscanf(argv[i] + 5, "%d", &n). The real call does the reading; then each conversion is
 * replayed on its own (its directive plus %n, into scratch space) to find the bytes it
 * consumed, whose labels the stored value gets. */
static int scan_labelled(const char *routine, const char *str, const char *format, va_list ap) {
  va_list args;
  va_copy(args, ap);
  int result = vsscanf(str, format, ap);
  size_t length = strlen(str);
  char *scratch = malloc(length + sizeof(long double) + 1);
  char *piece = malloc(strlen(format) + 3);
  const char *at = str;
  const char *f = format;
  int stored = 0;
  while (scratch && piece && *f && stored < result) {
    pc_directive d = next_directive(f);
    if (!d.supported) break;
    size_t n = (size_t)(d.end - f);
    memcpy(piece, f, n);
    strcpy(piece + n, "%n");
    int used = -1;
    int got = d.assigns ? sscanf(at, piece, scratch, &used) : sscanf(at, piece, &used);
    if (used < 0 || got < (d.assigns ? 1 : 0)) break;
    if (d.assigns) {
      char *target = va_arg(args, char *);
      size_t size = d.size ? d.size : strlen(target) + 1;
      dfsan_set_label(consumed(at, (size_t)used, routine), target, size);
      stored++;
    }
    at += used;
    f = d.end;
  }
  free(scratch);
  free(piece);
  va_end(args);
  return result;
}

int __dfsw_sscanf(const char *str, const char *format, dfsan_label str_label,
                  dfsan_label format_label, dfsan_label *va_labels, dfsan_label *ret_label,
                  ...) {
  (void)str_label;
  (void)format_label;
  (void)va_labels;
  va_list ap;
  va_start(ap, ret_label);
  int result = scan_labelled("sscanf", str, format, ap);
  va_end(ap);
  *ret_label = 0;
  return result;
}

/* glibc's name for sscanf in strict C99 and later modes. */
int __dfsw___isoc99_sscanf(const char *str, const char *format, dfsan_label str_label,
                           dfsan_label format_label, dfsan_label *va_labels,
                           dfsan_label *ret_label, ...) {
  (void)str_label;
  (void)format_label;
  (void)va_labels;
  va_list ap;
  va_start(ap, ret_label);
  int result = scan_labelled("sscanf", str, format, ap);
  va_end(ap);
  *ret_label = 0;
  return result;
}

/* ---- library routines (called by the generated MPI wrappers) ------------------------------ */

static int routine_index(const char *name) {
  for (int i = 0; i < n_mpi_names; i++)
    if (mpi_names[i] == name || strcmp(mpi_names[i], name) == 0) return i;
  if (n_mpi_names == 256) return -1;
  mpi_names[n_mpi_names] = name;
  return n_mpi_names++;
}

void __perfcast_library_call(const char *routine, dfsan_label count_labels) {
  pc_frame *f = top();
  pc_node *n = &nodes[f->node];
  int r = routine_index(routine);
  int site = take_call_site(f, PC_LIBRARY_CALLEE);
  if (r < 0) return;
  for (pc_mpi_record *m = n->mpi; m; m = m->next) {
    if (m->routine == r && m->call_loop == f->cur_loop && m->call_site == site) {
      m->labels |= count_labels;
      m->count++;
      return;
    }
  }
  pc_mpi_record *m = calloc(1, sizeof *m);
  m->routine = r;
  m->call_loop = f->cur_loop;
  m->call_site = site;
  m->labels = count_labels;
  m->count = 1;
  m->next = n->mpi;
  n->mpi = m;
}

/* ---- output ------------------------------------------------------------------------------ */

/* At exit. Frames still active (exit() called below main) have not handed over their site
 * records; their arrays are still on the stack. */
static void write_records(void) {
  for (int d = depth - 1; d > 0; d--) flush_sites(&frames[d]);
  const char *dir = getenv("PERFCAST_TAINT_OUT");
  if (!dir || !*dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/taint.%ld.txt", dir, (long)getpid());
  FILE *out = fopen(path, "w");
  if (!out) {
    fprintf(stderr, "perfcast taint runtime: cannot write %s\n", path);
    return;
  }
  fprintf(out, "perfcast-taint-raw 2\n");
  for (int i = 0; i < n_params; i++) fprintf(out, "param %d %s\n", i, param_names[i]);
  for (int i = 0; i < n_untracked; i++) fprintf(out, "untracked %s\n", untracked[i]);
  for (int i = 0; i < n_missing; i++) fprintf(out, "missing %s\n", missing[i]);
  for (int bit = 0; bit < n_params; bit++)
    for (int i = 0; i < 8 && read_by[bit][i]; i++)
      fprintf(out, "read %s %s\n", param_names[bit], read_by[bit][i]);
  for (int i = 1; i < n_nodes; i++) {
    pc_node *n = &nodes[i];
    fprintf(out, "node %d %d %d %d %d %d\n", i, n->parent, n->fid, n->call_loop, n->call_site,
            n->recursive);
    for (int s = 0; s < n->nsites; s++)
      if (n->sites[s].count)
        fprintf(out, "site %d %d %u %llu %llu\n", i, s, n->sites[s].labels,
                (unsigned long long)n->sites[s].count, (unsigned long long)n->sites[s].taken);
    for (pc_mpi_record *m = n->mpi; m; m = m->next)
      fprintf(out, "call %d %d %d %s %u %llu\n", i, m->call_loop, m->call_site,
              mpi_names[m->routine], m->labels, (unsigned long long)m->count);
  }
  fclose(out);
}
