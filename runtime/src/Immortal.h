// Immortal<T>: a namespace-scope object built at load time like any other global and
// never destroyed.
//
// The prefetch thread and the waiting threads may outlive main(): exit does not wait
// for them (shutdown gives them a moment, then lets exit end them). Exit runs the
// destructors of namespace-scope objects, so a std::map the PT was reading, destroyed
// under it, is a use after free: a fault on a loaded machine, where the PT is still
// inside a runtime call when exit comes. The rule: libppios has no exit-time
// destructor. Every namespace-scope object with a non-trivial destructor is an
// Immortal, every function-local static a pointer to a heap object never freed;
// tests/runtime/check_no_exit_destructors verifies it on the built library.
#pragma once

#include <new>
#include <utility>

namespace ppios {

template <class T>
class Immortal {
 public:
  template <class... Args>
  explicit Immortal(Args &&...args) {
    ::new (static_cast<void *>(storage_)) T(std::forward<Args>(args)...);
  }
  Immortal(const Immortal &) = delete;
  Immortal &operator=(const Immortal &) = delete;
  // No destructor: the object's storage stays valid until the process ends.

  T &operator*() { return *get(); }
  T *operator->() { return get(); }

 private:
  T *get() { return std::launder(reinterpret_cast<T *>(storage_)); }
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace ppios
