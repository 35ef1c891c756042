// A generator of stores for the prefetch thread's confinement (docs/design/
// pt-confinement.md, "Every store and call is seen"): every kind of store C and clang's
// builtins have, made directly in main(), by a helper through its pointer parameter, or
// by a helper that first points its parameter at other memory, into the PT's own local,
// the MT's heap block or a global. The offset of a read depends on the store's value, so
// the read is prefetched exactly when the PT runs the store. A store into the program's
// memory must never be run (the read is left alone); one into the PT's own local, made
// directly or through a parameter that stays the argument, must be (so the refusals are
// about where the store lands, not about the kind).
#include "PrefetchPlanner.h"
#include "SideEffects.h"
#include "StatementUnits.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/Frontend/ASTUnit.h"
#include "clang/Tooling/Tooling.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ppios {
namespace {

const char *const Prelude = R"(
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int MPI_Init(int *, char ***);
int MPI_Finalize(void);
static long g;
/* Stores through its parameter, which stays the argument. */
static int bump(long *p) { *p += 1; return 8; }
)";

// A store of each kind, as an expression whose value is the read's offset: LV is the
// lvalue stored to, P a pointer to it; t1, t2 are scratch locals of the function.
struct StoreKind {
  const char *Name;
  const char *Expr;
};
const StoreKind Kinds[] = {
    {"assign", "(LV = i * 64L)"},
    {"add-assign", "(LV += 64)"},
    {"shl-assign", "(LV <<= 1, i * 64L)"},
    {"or-assign", "(LV |= 1, i * 64L)"},
    {"pre-increment", "(++LV, i * 64L)"},
    {"post-decrement", "(LV--, i * 64L)"},
    {"atomic-fetch-add", "__atomic_fetch_add(P, 64, __ATOMIC_RELAXED)"},
    {"atomic-add-fetch", "__atomic_add_fetch(P, 64, __ATOMIC_RELAXED)"},
    {"atomic-store-n", "(__atomic_store_n(P, i * 64L, __ATOMIC_RELAXED), i * 64L)"},
    {"atomic-store", "(t1 = i * 64L, __atomic_store(P, &t1, __ATOMIC_RELAXED), t1)"},
    {"atomic-exchange-n", "(__atomic_exchange_n(P, 5L, __ATOMIC_RELAXED), i * 64L)"},
    {"atomic-exchange-result", "(__atomic_exchange(&t1, &t2, P, __ATOMIC_RELAXED), i * 64L)"},
    {"atomic-load-result", "(__atomic_load(&t1, P, __ATOMIC_RELAXED), i * 64L)"},
    {"atomic-cmpxchg-expected",
     "(__atomic_compare_exchange_n(&t1, P, 5L, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED), i * 64L)"},
    {"c11-fetch-add", "__c11_atomic_fetch_add((_Atomic long *)P, 64, __ATOMIC_RELAXED)"},
    {"c11-store", "(__c11_atomic_store((_Atomic long *)P, 7L, __ATOMIC_RELAXED), i * 64L)"},
    {"memcpy", "(t1 = i * 64L, memcpy(P, &t1, sizeof t1), t1)"},
    {"memset", "(memset(P, 0, sizeof(long)), i * 64L)"},
    {"snprintf-n", "(64L * snprintf(buf2, sizeof buf2, \"%d%n\", i, (int *)P))"},
    {"strtol-end", "(strtol(\"64\", (char **)P, 10) * i)"},
    {"vla-sizeof", "((long)sizeof(double[bump(P)]) * i)"},
    {"vla-cast", "((long)sizeof(*(double(*)[bump(P)])0) * i)"},
};

enum class Target { Local, Heap, Global };
enum class Placement { Direct, Helper, RepointingHelper };

const char *name(Target T) {
  return T == Target::Local ? "local" : T == Target::Heap ? "heap" : "global";
}
const char *name(Placement P) {
  return P == Placement::Direct ? "direct"
         : P == Placement::Helper ? "helper"
                                  : "repointing-helper";
}

std::string replace(std::string S, const std::string &From, const std::string &To) {
  for (size_t At = S.find(From); At != std::string::npos; At = S.find(From, At + To.size()))
    S.replace(At, From.size(), To);
  return S;
}

std::string store(const StoreKind &K, const std::string &LValue, const std::string &Pointer) {
  return replace(replace(K.Expr, "LV", "(" + LValue + ")"), "P", "(" + Pointer + ")");
}

// Where the store lands. The local is the PT's own (main()'s PT declares its copy); the
// heap block is the MT's (allocated before the PT starts, its pointer captured); the
// global is the program's: main()'s PT would store to its own copy of `g` by that name,
// so main() reaches it through a pointer it captured, `gp`, and a helper by its name.
std::string program(const StoreKind &K, Target T, Placement P) {
  std::string LValue = T == Target::Local ? "mine" : T == Target::Heap ? "*heap" : "*gp";
  std::string Pointer = T == Target::Local ? "&mine" : T == Target::Heap ? "heap" : "gp";
  std::string Helper, Offset;
  const char *Scratch = "long t1 = 0, t2 = 0; char buf2[32];\n  (void)t1; (void)t2; (void)buf2;\n";
  switch (P) {
  case Placement::Direct:
    Offset = store(K, LValue, Pointer);
    break;
  case Placement::Helper:
    Helper = "static long helper(long *p, int i) {\n  " + std::string(Scratch) + "  return " +
             (T == Target::Global ? store(K, "g", "&g") : store(K, "*p", "p")) + ";\n}\n";
    Offset = "helper(" + (T == Target::Global ? std::string("&mine") : Pointer) + ", i)";
    break;
  case Placement::RepointingHelper:
    Helper = "static long helper(long *p, long *q, int i) {\n  " + std::string(Scratch) +
             "  if (q) p = q;\n  return " + store(K, "*p", "p") + ";\n}\n";
    Offset = "helper(&mine, " + Pointer + ", i)";
    break;
  }
  return Helper + R"(
int main(int argc, char **argv) {
  long mine = 0, off = 0;
  long *heap = calloc(1, sizeof *heap), *gp = &g;
  )" + std::string(Scratch) + R"(
  char buf[64];
  int fd, i;
  MPI_Init(&argc, &argv);
  fd = open(argv[1], O_RDONLY);
  for (i = 0; i < 8; i++) {
    off = )" + Offset + R"(;
    pread(fd, buf, sizeof buf, off);
  }
  MPI_Finalize();
  return (int)(mine + *heap + *gp);
}
)";
}

struct Outcome {
  bool Built = false;
  bool Prefetched = false;
  std::string Reason;
};

Outcome planRead(const std::string &Main) {
  Outcome O;
  std::unique_ptr<clang::ASTUnit> AST = clang::tooling::buildASTFromCodeWithArgs(
      std::string(Prelude) + Main,
      {"-resource-dir=/usr/lib/llvm-16/lib/clang/16", "-Wno-everything"}, "t.c");
  if (!AST || AST->getDiagnostics().hasErrorOccurred())
    return O;
  const clang::FunctionDecl *FD = nullptr;
  for (const clang::Decl *D : AST->getASTContext().getTranslationUnitDecl()->decls())
    if (const auto *F = llvm::dyn_cast<clang::FunctionDecl>(D))
      if (F->isMain() && F->hasBody())
        FD = F;
  if (!FD)
    return O;
  SideEffectOracle Oracle;
  FunctionUnits Units(AST->getASTContext(), FD, Oracle);
  PrefetchPlanner Plan(Units);
  Plan.plan();
  if (Plan.decisions().size() != 1)
    return O;
  O.Built = true;
  O.Prefetched = Plan.decisions()[0].Prefetched;
  O.Reason = Plan.decisions()[0].Reason;
  return O;
}

// PPIOS_CONFINEMENT_KEEP=<dir> writes each generated program there, to run ppios-cc on.
TEST(Confinement, EveryStoreKindIntoProgramMemoryIsRefused) {
  const char *Keep = std::getenv("PPIOS_CONFINEMENT_KEEP");
  unsigned Checked = 0;
  for (const StoreKind &K : Kinds)
    for (Placement P : {Placement::Direct, Placement::Helper, Placement::RepointingHelper})
      for (Target T : {Target::Local, Target::Heap, Target::Global}) {
        std::string Source = program(K, T, P);
        if (Keep) {
          std::ofstream Out(std::string(Keep) + "/" + K.Name + "-" + name(P) + "-" + name(T) + ".c");
          Out << Prelude << Source;
        }
        Outcome O = planRead(Source);
        std::string Case = std::string(K.Name) + ", " + name(P) + ", into the " + name(T) +
                           " (reason: " + O.Reason + ")\n" + Source;
        ASSERT_TRUE(O.Built) << Case;
        if (T != Target::Local) {
          // Into the program's memory: never run by the PT.
          EXPECT_FALSE(O.Prefetched) << Case;
        } else if (P != Placement::RepointingHelper) {
          // Into the PT's own local: run, so the refusals above are about the target.
          EXPECT_TRUE(O.Prefetched) << Case;
        } else {
          // A re-pointed parameter may point anywhere, whatever it points at here.
          EXPECT_FALSE(O.Prefetched) << Case;
        }
        ++Checked;
      }
  EXPECT_EQ(Checked, std::size(Kinds) * 9);
}

// Every kind of clang's nodes is listed as known or not: a kind the walkers do not list
// refuses what contains it, in main() and in a helper alike.
TEST(Confinement, AnUnlistedExpressionKindIsRefused) {
  // __builtin_dump_struct is a pseudo-object calling printf.
  const char *Helper = R"(
struct rec { long at; };
static long where(int i) {
  struct rec r = {i * 64L};
  __builtin_dump_struct(&r, printf);
  return r.at;
}
)";
  std::string Main = std::string(Helper) + R"(
int main(int argc, char **argv) {
  char buf[64];
  int fd, i;
  MPI_Init(&argc, &argv);
  fd = open(argv[1], O_RDONLY);
  for (i = 0; i < 8; i++)
    pread(fd, buf, sizeof buf, where(i));
  MPI_Finalize();
  return 0;
}
)";
  Outcome O = planRead(Main);
  ASSERT_TRUE(O.Built);
  EXPECT_FALSE(O.Prefetched) << O.Reason;
}

} // namespace
} // namespace ppios
