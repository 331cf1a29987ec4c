/* Declarations the perfcast source rewriter relies on; included first in every rewritten
 * file. All functions live in perfcast_taint_rt.c (uninstrumented, see its ABI list). */
#ifndef PERFCAST_PRELUDE_H
#define PERFCAST_PRELUDE_H
typedef unsigned char __pc_label;
#ifdef __cplusplus
extern "C" {
#endif
void __perfcast_enter(int fid, int nsites);
void __perfcast_leave(int *frame_variable);
void __perfcast_loop_begin(int loop);
void __perfcast_loop_end(int parent_loop);
__pc_label __perfcast_cond_label(int site, int value);
__pc_label __perfcast_value_label(int site, long long value);
void __perfcast_flow(void *addr, unsigned long size, __pc_label label);
void __perfcast_argv(int argc, char **argv);
void __perfcast_register(void *addr, unsigned long size, const char *name);

/* The control (labels) a call is made under, read by the callee at entry (__pc_in) and put
 * back at its exit, so calls in the arguments of a call see the same value as the call. */
extern __pc_label __perfcast_control;
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

/* A condition (loop exit or branch) or a switch value: the runtime records its labels and
 * returns them into the function's slot; the value comes back unchanged, with its label. */
static inline __attribute__((unused)) int __perfcast_cond(int site, int value,
                                                          __pc_label *slot) {
  *slot = __perfcast_cond_label(site, value);
  return value;
}

static inline __attribute__((unused)) long long __perfcast_value(int site, long long value,
                                                                 __pc_label *slot) {
  *slot = __perfcast_value_label(site, value);
  return value;
}

/* A store under control: the runtime is called only when there is a label to add. */
static inline __attribute__((unused)) void __perfcast_flow_if(void *addr, unsigned long size,
                                                              __pc_label label) {
  if (label) __perfcast_flow(addr, size, label);
}
#ifdef __cplusplus
}
#endif

/* In every rewritten function that writes for its caller or calls project code. */
#define __PERFCAST_INHERIT \
  __attribute__((cleanup(__perfcast_restore_control), unused)) __pc_label __pc_in = \
      __perfcast_control

/* One per instrumented function: enters the shadow call stack, leaves it on every exit. */
#define __PERFCAST_FRAME(fid, nsites) \
  __attribute__((cleanup(__perfcast_leave), unused)) int __pc_frame = \
      (__perfcast_enter((fid), (nsites)), (fid))

#ifdef __cplusplus
#include <iterator>
/* Range-for: the trip count is decided by begin != end of the range, checked once up front.
 * Returns the range itself (by reference for lvalues, by value for temporaries). */
template <class R>
R __perfcast_range(int site, __pc_label *slot, R &&range) {
  using std::begin;
  using std::end;
  __perfcast_cond(site, !!(begin(range) != end(range)), slot);
  return static_cast<R &&>(range);
}
#endif
#endif
