// Whether this test binary runs under ThreadSanitizer or AddressSanitizer:
// tests that measure load or timing scale down there. GCC says so with
// __SANITIZE_*__, clang with __has_feature; both are asked.
#pragma once

namespace hourglass::testing {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

}  // namespace hourglass::testing
