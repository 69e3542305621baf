// Whether the tests are built with a sanitizer that keeps shadow memory: AddressSanitizer or ThreadSanitizer. Both
// reserve terabytes of address space for it at start-up, so a program built with one cannot start under RLIMIT_AS,
// and its resident size counts the shadow (and, for AddressSanitizer, the freed memory it quarantines): tests that
// limit or measure a child's memory need a plain build.
#pragma once

namespace cpsim::test {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kShadowMemory = true;
#else
constexpr bool kShadowMemory = false;
#endif
}  // namespace cpsim::test
