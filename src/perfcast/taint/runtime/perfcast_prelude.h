/* Declarations the perfcast source rewriter relies on; included first in every rewritten
 * file. All functions live in perfcast_taint_rt.c (uninstrumented, see its ABI list). */
#ifndef PERFCAST_PRELUDE_H
#define PERFCAST_PRELUDE_H
typedef unsigned char __pc_label;
/* What a condition site saw in one activation of its function: the union of its labels (as
 * the DataFlowSanitizer label of `labels`, whose data stays 0), how often it was evaluated
 * and how often it was true. The frame keeps one per site and the runtime adds them to the
 * calling context when the frame ends. Wider than the label so that the type-based alias
 * analysis tells the counters from the program's own data: in a loop without calls the
 * compiler keeps them in registers and stores them once after the loop. */
typedef struct {
  unsigned long long labels;
  unsigned long long count;
  unsigned long long taken;
} __pc_site;
#ifdef __cplusplus
extern "C" {
#endif
void __perfcast_enter(int fid, int nsites, __pc_site *sites);
void __perfcast_leave(int *frame_variable);
void __perfcast_loop_begin(int loop);
void __perfcast_loop_end(int parent_loop);
void __perfcast_flow(void *addr, unsigned long size, __pc_label control);
void __perfcast_argv(int argc, char **argv);
void __perfcast_register(void *addr, unsigned long size, const char *name);

/* The control (a carrier of labels) a call is made under, read by the callee at entry
 * (__pc_in) and put back at its exit, so calls in the arguments of a call see the same
 * value as the call. Wider than a label: a store to a char may alias any object, so the
 * compiler would reload the program's pointers and their shadows after every call site of
 * a loop (the getters case of benchmarks/taint_overhead.py ran 10 % more instructions). */
extern unsigned long long __perfcast_control;
/* Calls announced by __perfcast_call and not yet entered: callee id and call site. */
typedef struct {
  int fid;
  int site;
} __pc_pending_call;
#define __PC_MAX_PENDING 256
extern __pc_pending_call __perfcast_pending[__PC_MAX_PENDING];
extern int __perfcast_npending;

/* Before a call of project code or a library routine: the control it is made under, and
 * (callee id >= 0 or -2 for a library routine) its call site, for the callee's entry to pop.
 * Inline in the instrumented file: no runtime entry point, no ABI list entry. */
static inline __attribute__((unused)) void __perfcast_call(__pc_label control, int fid,
                                                           int site) {
  __perfcast_control = control;
  if (fid != -1 && __perfcast_npending < __PC_MAX_PENDING) {
    __perfcast_pending[__perfcast_npending].fid = fid;
    __perfcast_pending[__perfcast_npending].site = site;
    __perfcast_npending++;
  }
}

static inline __attribute__((unused)) void __perfcast_restore_control(__pc_label *entry) {
  __perfcast_control = *entry;
}

/* The labels of a condition as a *carrier*: data 0, the condition's labels as its own label.
 * DataFlowSanitizer gives the result of an inline asm statement the union of its operands'
 * labels, and the optimiser cannot see through it: it cannot fold the carrier to 0, nor to
 * a constant where the condition is known (a loop body knows its condition was true, so a
 * carrier computed from the condition's value there would lose its labels). Built with
 * control-flow taint off (PERFCAST_NO_CONTROL_FLOW), the slots hold no labels. */
static inline __attribute__((unused, always_inline)) __pc_label __perfcast_carrier(
    long long value) {
  __pc_label carrier;
  __asm__("" : "=r"(carrier) : "0"((__pc_label)0), "r"(value));
  return carrier;
}

#ifdef PERFCAST_NO_CONTROL_FLOW
#define __PC_CONTROL(carrier) ((__pc_label)0)
#else
#define __PC_CONTROL(carrier) (carrier)
#endif

/* A condition (loop exit or branch) or a switch value: its labels go to the function's slot
 * as a carrier (control-flow taint of what it decides) and, with its outcome, to the site's
 * record in the frame (site null: a function pruned statically keeps its control-flow taint
 * without a frame). No call: a call on every loop test was most of the taint run's cost
 * (src/perfcast/taint/README.md). The value comes back unchanged, with its label. */
static inline __attribute__((unused, always_inline)) int __perfcast_cond(int value,
                                                                         __pc_label *slot,
                                                                         __pc_site *site) {
  __pc_label carrier = __perfcast_carrier(value);
  if (site) {
    site->labels |= carrier;
    site->count++;
    site->taken += value != 0;
  }
  *slot = __PC_CONTROL(carrier);
  return value;
}

static inline __attribute__((unused, always_inline)) long long __perfcast_value(
    long long value, __pc_label *slot, __pc_site *site) {
  __pc_label carrier = __perfcast_carrier(value);
  if (site) {
    site->labels |= carrier;
    site->count++;
    site->taken += value != 0;
  }
  *slot = __PC_CONTROL(carrier);
  return value;
}

/* One width of __perfcast_or_control: the same three steps with each unsigned type. */
#define __PC_OR_BITS(type)                               \
  {                                                      \
    type __pc_bits;                                      \
    __builtin_memcpy(&__pc_bits, word, sizeof(type));    \
    __pc_bits |= control;                                \
    __builtin_memcpy(word, &__pc_bits, sizeof(type));    \
    return;                                              \
  }

/* Control-flow taint of a store. A control value (a condition slot, __pc_in, their OR) is
 * a carrier, so or-ing it into the bits of a value leaves the value as it is and gives it
 * the control's labels: inline, without a call, and without taking the object's address
 * out of the function (a local stays in a register). `word` is a local copy: the compiler
 * keeps it in a register, and the object is read and written with its own type (see
 * __perfcast_flow_scalar). */
static inline __attribute__((unused, always_inline)) void __perfcast_or_control(
    void *word, unsigned long size, __pc_label control) {
  switch (size) {
    case 1: __PC_OR_BITS(unsigned char)
    case 2: __PC_OR_BITS(unsigned short)
    case 4: __PC_OR_BITS(unsigned int)
    case 8: __PC_OR_BITS(unsigned long long)
    default: /* long double: the runtime adds the label to every byte */
      __perfcast_flow(word, size, control);
  }
}
#undef __PC_OR_BITS
#ifdef __cplusplus
}
#endif

/* The scalar *p (just written) gains the control's labels. Read and written through its own
 * type, not as bytes: a byte-wise store may alias any object, and the compiler would then
 * reload the program's pointers, and their shadows, after every store under control. For a
 * whole scalar only: or-ing a word unites the labels of all its bytes, which an aggregate's
 * fields must keep apart (__perfcast_flow). The copy keeps a `volatile` of the object's type,
 * which the cast takes off (C++ refuses `volatile T *` as `void *`). */
#define __perfcast_flow_scalar(p, control)                                   \
  ((void)({                                                                 \
    __typeof__(*(p)) __pc_word = *(p);                                      \
    __perfcast_or_control((void *)&__pc_word, sizeof __pc_word, (control)); \
    *(p) = __pc_word;                                                       \
  }))

/* In every rewritten function that writes for its caller or calls project code. */
#define __PERFCAST_INHERIT \
  __attribute__((cleanup(__perfcast_restore_control), unused)) __pc_label __pc_in = \
      (__pc_label)__perfcast_control

/* One per instrumented function: the records of its condition sites (one spare, so that a
 * function without sites declares no empty array), entering the shadow call stack, and
 * leaving it on every exit, which adds the records to the calling context. */
#define __PERFCAST_FRAME(fid, nsites)                              \
  __pc_site __pc_sites[(nsites) + 1] = {{0, 0, 0}};                \
  __attribute__((cleanup(__perfcast_leave), unused)) int __pc_frame = \
      (__perfcast_enter((fid), (nsites), __pc_sites), (fid))

#ifdef __cplusplus
#include <iterator>
/* Range-for: the trip count is decided by begin != end of the range, checked once up front.
 * Returns the range itself (by reference for lvalues, by value for temporaries). */
template <class R>
R __perfcast_range(__pc_site *site, __pc_label *slot, R &&range) {
  using std::begin;
  using std::end;
  __perfcast_cond(!!(begin(range) != end(range)), slot, site);
  return static_cast<R &&>(range);
}
#endif
#endif
