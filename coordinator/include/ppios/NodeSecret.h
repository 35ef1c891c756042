// Names of a user's node-local segments that other local users cannot guess.
//
// /dev/shm is shared by every local user: a name anyone can compute can be taken first by
// anyone (a file of theirs there is refused, and the user's jobs then lose their cap
// until root removes it). So a private segment's name carries a keyed
// hash of its fixed part ("ppios-coord-v7.<uid>.<target>" ->
// "ppios-coord-v7.<uid>.<target>.<16 hex digits>"), keyed with a secret only the user can
// read: $HOME/.ppios/node-secret, made by the first process that needs it. Every process
// of the user with the same $HOME computes the same name; nobody else can.
//
// Without a usable secret ($HOME unset, a home that cannot be written, a secret file that
// is refused) the name is the fixed part alone, as before, and the reason is kept so that
// whoever reports a segment as unusable can say why its name was predictable.
//
// Segments shared on purpose (a group's, made by an administrator) keep fixed names: every
// member must compute them, and their owner and mode checks protect them. So does the
// runtime's change table: every process of the user must map the same one, whatever its
// $HOME, and a planted one only makes it unavailable, which is safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ppios {

struct NodeSecret {
  bool usable = false;
  uint64_t k0 = 0, k1 = 0;  // the 128-bit key (SipHash)
  std::string path;         // the secret file ("" when there is no home)
  std::string why;          // why it is not usable ("" when it is)
};

// The process's secret, looked up (read or created) at the first call and kept: the
// runtime makes that call while the process has one thread (ChangeGenerations::node), so
// a forked child never touches the file. Thread-safe.
const NodeSecret &node_secret();

// Reads the secret under `home` (nullptr or "": none), creating it when missing. Never
// blocks (a FIFO at the name is refused, not waited on); concurrent callers of one user
// end with one secret. Not cached: for node_secret() and tests.
NodeSecret load_node_secret(const char *home);

// SipHash-2-4 of `data` under the key (k0, k1): a keyed hash whose output reveals nothing
// of the key, so names made with it cannot be predicted without the secret.
uint64_t siphash24(uint64_t k0, uint64_t k1, const void *data, size_t len);

// `fixed` with "." and the keyed hash of `fixed` appended (16 hex digits) when `secret`
// is usable; `fixed` itself otherwise.
std::string keyed_segment_name(const std::string &fixed, const NodeSecret &secret);

// True when `name` is keyed_segment_name(f, secret) for its own fixed part f (secret
// usable): a name a process of this user with this secret uses.
bool is_keyed_segment_name(const std::string &name, const NodeSecret &secret);

// A sentence for reports of an unusable segment under a predictable name: "" when the
// secret is usable, else why the name was predictable.
std::string predictable_name_note(const NodeSecret &secret);

}  // namespace ppios
