// Whether the tests are built with AddressSanitizer. It reserves terabytes of address space for its shadow memory
// at start-up, so a program built with it cannot start under RLIMIT_AS, and its resident size counts the shadow and
// the freed memory it quarantines: tests that limit or measure a child's memory plainly need a plain build.
#pragma once

namespace cpsim::test {
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
}  // namespace cpsim::test
