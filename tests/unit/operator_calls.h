// Counts the torch operator calls (RecordFunction callbacks) a piece of code makes on this
// thread: the tests of code that must not go through the dispatcher.
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <memory>

namespace paradiff::testing {

template <typename F>
int64_t OperatorCalls(F&& f) {
  static thread_local int64_t calls = 0;
  calls = 0;
  const auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
        ++calls;
        return nullptr;
      }));
  f();
  at::removeCallback(handle);
  return calls;
}

}  // namespace paradiff::testing
