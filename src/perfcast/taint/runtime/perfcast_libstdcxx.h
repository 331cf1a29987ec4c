/* Included first (-include) in every C++ compile of a perfcast taint build.
 *
 * libstdc++ declares its std::string members `extern template`: the program calls the copies
 * compiled into libstdc++.so, which DataFlowSanitizer cannot instrument, so a parameter's
 * label is lost as soon as its text is copied into a std::string (a copy, `+=`, substr; what
 * std::stoi then reads carries nothing). With _GLIBCXX_ASSERTIONS defined, c++config.h sets
 * _GLIBCXX_EXTERN_TEMPLATE to -1, which drops the extern templates of basic_string only, so
 * its code is instantiated in the program's own translation units and instrumented.
 *
 * The assertions themselves are not wanted: they would abort a run on an idiom that works
 * (`&v[0]` of an empty vector) and cost time. So c++config.h is read once with the macro
 * defined, which fixes _GLIBCXX_EXTERN_TEMPLATE (the header is guarded), and the macro and
 * the assertion hook are then put back as they are without it. A program that asks for
 * assertions itself (-D_GLIBCXX_ASSERTIONS, -D_GLIBCXX_DEBUG) keeps them. Other standard
 * libraries (libc++) are left alone.
 */
#if defined(__cplusplus) && !defined(_GLIBCXX_ASSERTIONS) && !defined(_GLIBCXX_DEBUG)
#if defined(__has_include)
#if __has_include(<bits/c++config.h>)
#define _GLIBCXX_ASSERTIONS 1
#include <bits/c++config.h>
#undef _GLIBCXX_ASSERTIONS
#undef __glibcxx_assert
#define __glibcxx_assert(cond) \
  do {                         \
    __glibcxx_constexpr_assert(cond); \
  } while (false)
#endif
#endif
#endif
