/* perfcast.h -- mark a program's performance parameters for `perfcast taint`.
 *
 *   #include "perfcast.h"
 *   ...
 *   perfcast_register(&opts.nx, "size");
 *
 * In a normal build perfcast_register expands to nothing. `perfcast taint` compiles with
 * -DPERFCAST_TAINT, where it labels the bytes of the variable with the parameter's taint
 * label so that every loop whose trip count the value reaches reports the parameter.
 * Register after the variable holds its final value (after parsing the command line).
 */
#ifndef PERFCAST_H
#define PERFCAST_H

#ifdef PERFCAST_TAINT
#ifdef __cplusplus
extern "C" {
#endif
void __perfcast_register(void *addr, unsigned long size, const char *name);
#ifdef __cplusplus
}
#endif
#define perfcast_register(addr, name) \
  __perfcast_register((void *)(addr), (unsigned long)sizeof(*(addr)), (name))
#else
#define perfcast_register(addr, name) ((void)0)
#endif

#endif /* PERFCAST_H */
