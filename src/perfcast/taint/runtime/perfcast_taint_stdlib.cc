/* perfcast taint runtime, C++ part: parameter labels through libstdc++'s string streams.
 *
 * Compiled WITHOUT -fsanitize=dataflow, like perfcast_taint_rt.c, and linked into C++
 * taint builds only. libstdc++.so is uninstrumented: what it copies or parses carries no
 * label. Two places matter for reading parameters (miniFE's parse_parameter: `std::istringstream
 * isstr(str); isstr >> value;`), and the ABI list makes both `custom`, so the instrumented
 * program calls the __dfsw_ wrappers below instead:
 *
 *   - the string streams' constructors and str(const string&) setters copy the string into
 *     the stream buffer inside the library. After the real call, each byte of the buffer's
 *     get area gets the labels of the byte of the source string it was copied from;
 *   - `istream >> T` for the arithmetic T parses inside the library (num_get). After the real
 *     call, the value gets the union of the labels of the bytes the extraction consumed: the
 *     stream buffer's get pointer before and after the call delimit them (whitespace skipped
 *     included, which carries the same labels in practice). `>> std::string` and
 *     `std::getline` give each byte of the string the labels of the byte it was read from.
 *
 * std::string itself is compiled into the program's own translation units (the taint build
 * includes perfcast_libstdcxx.h, which turns libstdc++'s extern templates off for
 * basic_string), so its copies, `+=`, substr and std::stoi are instrumented and need nothing
 * here.
 *
 * The mangled names are libstdc++'s (GCC's C++11 ABI, std::__cxx11 strings); the taint build
 * lists the same names as `custom` in its ABI list (CXX_RUNTIME_ABI in taint/build.py). The
 * base-object constructors (C2) of the streams, which have a virtual base, take the VTT as
 * their second argument and are called by the real symbol; the others through C++.
 */
#include <sanitizer/dfsan_interface.h>

#include <cstddef>
#include <istream>
#include <new>
#include <sstream>
#include <string>

extern "C" dfsan_label __perfcast_consumed(const void *s, size_t n, const char *routine);

namespace {

const char READ_BY[] = "std::istream::operator>>";

/* The protected pointers of a stream buffer's get area, reached through a derived class's
 * pointers to members (the standard way around `protected`, no layout assumed). */
struct GetArea : std::streambuf {
  static char *begin(std::streambuf *b) { return (b->*&GetArea::eback)(); }
  static char *next(std::streambuf *b) { return (b->*&GetArea::gptr)(); }
  static char *end(std::streambuf *b) { return (b->*&GetArea::egptr)(); }
};

struct Window {
  std::streambuf *buf;
  char *begin, *next, *end;
};

Window window(std::istream *s) {
  std::streambuf *b = s->rdbuf();
  if (!b) return {nullptr, nullptr, nullptr, nullptr};
  return {b, GetArea::begin(b), GetArea::next(b), GetArea::end(b)};
}

/* The first and one past the last byte an extraction consumed, or {0, 0} where the buffer
 * was refilled in between (a file stream's underflow): then only what the new window
 * consumed is known, from its start. */
struct Span {
  const char *first, *last;
};

Span consumed_span(const Window &before, const Window &after) {
  if (!before.buf || before.buf != after.buf || !after.next) return {nullptr, nullptr};
  if (after.begin == before.begin && after.next >= before.next && after.next <= before.end)
    return {before.next, after.next};
  return {after.begin, after.next};
}

dfsan_label span_label(Span span) {
  if (!span.first || span.last <= span.first) return 0;
  return __perfcast_consumed(span.first, (size_t)(span.last - span.first), READ_BY);
}

/* Byte i of dst gets the labels of byte i of src, in runs of equal labels. */
void copy_labels(const char *src, char *dst, size_t n) {
  size_t i = 0;
  while (i < n) {
    dfsan_label label = dfsan_read_label(src + i, 1);
    size_t j = i + 1;
    while (j < n && dfsan_read_label(src + j, 1) == label) j++;
    dfsan_set_label(label, dst + i, j - i);
    i = j;
  }
}

/* The stream buffer now holds a copy of `src`: give its get area the string's labels. */
void seed(std::stringbuf *buf, const std::string *src) {
  char *begin = GetArea::begin(buf);
  char *end = GetArea::end(buf);
  if (!begin || end <= begin) return;
  size_t n = (size_t)(end - begin);
  copy_labels(src->data(), begin, n < src->size() ? n : src->size());
}

template <typename T> std::istream *extract(std::istream *s, T *value) {
  Window before = window(s);
  *s >> *value;
  dfsan_set_label(span_label(consumed_span(before, window(s))), value, sizeof *value);
  return s;
}

}  // namespace

using std::ios_base;
using std::istream;
using std::string;

/* ---- istream >> arithmetic ----------------------------------------------------------------
 * Out of line in libstdc++: operator>>(short&), operator>>(int&), and the extern-template
 * instantiations of the others; the header's inline operator>>(long&) etc. call
 * _M_extract<T>, and are called themselves where the compiler does not inline them (-O0). */
#define PC_EXTRACT(SUFFIX, T)                                                                  \
  extern "C" istream *__dfsw__ZNSirsER##SUFFIX(istream *s, T *v, dfsan_label, dfsan_label,     \
                                                dfsan_label *ret_label) {                      \
    *ret_label = 0;                                                                            \
    return extract(s, v);                                                                      \
  }
#define PC_EXTRACT_BOTH(SUFFIX, T)                                                             \
  PC_EXTRACT(SUFFIX, T)                                                                        \
  extern "C" istream *__dfsw__ZNSi10_M_extractI##SUFFIX##EERSiRT_(                             \
      istream *s, T *v, dfsan_label, dfsan_label, dfsan_label *ret_label) {                    \
    *ret_label = 0;                                                                            \
    return extract(s, v);                                                                      \
  }

PC_EXTRACT(s, short)
PC_EXTRACT(i, int)
PC_EXTRACT_BOTH(t, unsigned short)
PC_EXTRACT_BOTH(j, unsigned int)
PC_EXTRACT_BOTH(l, long)
PC_EXTRACT_BOTH(m, unsigned long)
PC_EXTRACT_BOTH(x, long long)
PC_EXTRACT_BOTH(y, unsigned long long)
PC_EXTRACT_BOTH(b, bool)
PC_EXTRACT_BOTH(f, float)
PC_EXTRACT_BOTH(d, double)
PC_EXTRACT_BOTH(e, long double)

/* ---- istream >> std::string, std::getline ------------------------------------------------ */

/* operator>>(istream&, string&): whitespace skipped, then the word, which ends at the get
 * pointer (the delimiter is not extracted). */
extern "C" istream *
__dfsw__ZStrsIcSt11char_traitsIcESaIcEERSt13basic_istreamIT_T0_ES7_RNSt7__cxx1112basic_stringIS4_S5_T1_EE(
    istream *s, string *str, dfsan_label, dfsan_label, dfsan_label *ret_label) {
  *ret_label = 0;
  Window before = window(s);
  *s >> *str;
  Span span = consumed_span(before, window(s));
  size_t n = str->size();
  if (span.first && (size_t)(span.last - span.first) >= n) {
    span_label(span);
    copy_labels(span.last - n, &(*str)[0], n);
  } else {
    dfsan_set_label(span_label(span), &(*str)[0], n);
  }
  return s;
}

/* getline(istream&, string&[, delim]): the line starts at the get pointer; the delimiter,
 * if found, is consumed but not stored. */
static istream *getline_labelled(istream *s, string *str, const char *delim) {
  Window before = window(s);
  if (delim)
    std::getline(*s, *str, *delim);
  else
    std::getline(*s, *str);
  Span span = consumed_span(before, window(s));
  size_t n = str->size();
  if (span.first == before.next && span.first && (size_t)(span.last - span.first) >= n) {
    span_label(span);
    copy_labels(span.first, &(*str)[0], n);
  } else {
    dfsan_set_label(span_label(span), &(*str)[0], n);
  }
  return s;
}

extern "C" istream *
__dfsw__ZSt7getlineIcSt11char_traitsIcESaIcEERSt13basic_istreamIT_T0_ES7_RNSt7__cxx1112basic_stringIS4_S5_T1_EE(
    istream *s, string *str, dfsan_label, dfsan_label, dfsan_label *ret_label) {
  *ret_label = 0;
  return getline_labelled(s, str, nullptr);
}

extern "C" istream *
__dfsw__ZSt7getlineIcSt11char_traitsIcESaIcEERSt13basic_istreamIT_T0_ES7_RNSt7__cxx1112basic_stringIS4_S5_T1_EES4_(
    istream *s, string *str, char delim, dfsan_label, dfsan_label, dfsan_label,
    dfsan_label *ret_label) {
  *ret_label = 0;
  return getline_labelled(s, str, &delim);
}

/* ---- string streams built from a string ---------------------------------------------------- */

#define PC_SB "_ZNSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEE"
#define PC_ISS "_ZNSt7__cxx1119basic_istringstreamIcSt11char_traitsIcESaIcEE"
#define PC_SS "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEE"

/* The base-object constructors of the streams (with their VTT), by their symbols. */
extern "C" void pc_iss_base_ctor(void *self, const void **vtt, const string *s,
                                 ios_base::openmode mode) __asm__(
    PC_ISS "C2ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode");
extern "C" void pc_ss_base_ctor(void *self, const void **vtt, const string *s,
                                ios_base::openmode mode) __asm__(
    PC_SS "C2ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode");

extern "C" {

void __dfsw__ZNSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEEC1ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode(
    std::stringbuf *self, const string *s, ios_base::openmode mode, dfsan_label, dfsan_label,
    dfsan_label) {
  new (self) std::stringbuf(*s, mode);
  seed(self, s);
}

/* No virtual base: the base-object constructor is the complete one. */
void __dfsw__ZNSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEEC2ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode(
    std::stringbuf *self, const string *s, ios_base::openmode mode, dfsan_label, dfsan_label,
    dfsan_label) {
  new (self) std::stringbuf(*s, mode);
  seed(self, s);
}

void __dfsw__ZNSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEE3strERKNS_12basic_stringIcS2_S3_EE(
    std::stringbuf *self, const string *s, dfsan_label, dfsan_label) {
  self->str(*s);
  seed(self, s);
}

void __dfsw__ZNSt7__cxx1119basic_istringstreamIcSt11char_traitsIcESaIcEEC1ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode(
    std::istringstream *self, const string *s, ios_base::openmode mode, dfsan_label,
    dfsan_label, dfsan_label) {
  new (self) std::istringstream(*s, mode);
  seed(self->rdbuf(), s);
}

void __dfsw__ZNSt7__cxx1119basic_istringstreamIcSt11char_traitsIcESaIcEEC2ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode(
    std::istringstream *self, const void **vtt, const string *s, ios_base::openmode mode,
    dfsan_label, dfsan_label, dfsan_label, dfsan_label) {
  pc_iss_base_ctor(self, vtt, s, mode);
  seed(self->rdbuf(), s);
}

void __dfsw__ZNSt7__cxx1119basic_istringstreamIcSt11char_traitsIcESaIcEE3strERKNS_12basic_stringIcS2_S3_EE(
    std::istringstream *self, const string *s, dfsan_label, dfsan_label) {
  self->str(*s);
  seed(self->rdbuf(), s);
}

void __dfsw__ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode(
    std::stringstream *self, const string *s, ios_base::openmode mode, dfsan_label,
    dfsan_label, dfsan_label) {
  new (self) std::stringstream(*s, mode);
  seed(self->rdbuf(), s);
}

void __dfsw__ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC2ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode(
    std::stringstream *self, const void **vtt, const string *s, ios_base::openmode mode,
    dfsan_label, dfsan_label, dfsan_label, dfsan_label) {
  pc_ss_base_ctor(self, vtt, s, mode);
  seed(self->rdbuf(), s);
}

void __dfsw__ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEE3strERKNS_12basic_stringIcS2_S3_EE(
    std::stringstream *self, const string *s, dfsan_label, dfsan_label) {
  self->str(*s);
  seed(self->rdbuf(), s);
}

}  // extern "C"
