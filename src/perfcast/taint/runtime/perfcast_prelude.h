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
int __perfcast_cond(int site, int value, __pc_label *slot);
long long __perfcast_value(int site, long long value, __pc_label *slot);
void __perfcast_flow(void *addr, unsigned long size, __pc_label label);
void __perfcast_argv(int argc, char **argv);
void __perfcast_register(void *addr, unsigned long size, const char *name);
#ifdef __cplusplus
}
#endif

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
