#include "DetachedThread.h"

#include <memory>
#include <new>

namespace ppios {
namespace {

void *run_body(void *arg) {
  std::unique_ptr<std::function<void()>> body(static_cast<std::function<void()> *>(arg));
  (*body)();
  return nullptr;
}

}  // namespace

bool start_detached_thread(std::function<void()> body, size_t stack_bytes, pthread_t *id) {
  auto *heap_body = new (std::nothrow) std::function<void()>(std::move(body));
  if (heap_body == nullptr) return false;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) {
    delete heap_body;
    return false;
  }
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (stack_bytes > 0) pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t thread;
  const int rc = pthread_create(id != nullptr ? id : &thread, &attr, run_body, heap_body);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    delete heap_body;
    return false;
  }
  return true;
}

}  // namespace ppios
