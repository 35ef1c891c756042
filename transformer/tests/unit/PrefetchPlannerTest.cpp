// Unit tests of the slicer: where the prefetch thread starts, which reads it pre-executes
// and why the others are left alone. The programs declare the few MPI functions they use,
// so no mpi.h is needed.
#include "PrefetchPlanner.h"
#include "SideEffects.h"
#include "StatementUnits.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/Frontend/ASTUnit.h"
#include "clang/Tooling/Tooling.h"

#include <gtest/gtest.h>

namespace ppios {
namespace {

const char *const Prelude = R"(
#include <fcntl.h>
#include <unistd.h>
int MPI_Init(int *, char ***);
int MPI_Comm_rank(int, int *);
int MPI_Bcast(void *, int, int, int, int);
int MPI_Finalize(void);
long parse(const char *);
)";

struct Planned {
  std::unique_ptr<clang::ASTUnit> AST;
  std::unique_ptr<SideEffectOracle> Oracle;
  std::unique_ptr<FunctionUnits> Units;
  std::unique_ptr<PrefetchPlanner> Plan;
  bool HasThread = false;
};

Planned plan(const std::string &Main) {
  Planned P;
  P.AST = clang::tooling::buildASTFromCodeWithArgs(
      std::string(Prelude) + Main, {"-resource-dir=/usr/lib/llvm-16/lib/clang/16"}, "t.c");
  const clang::FunctionDecl *FD = nullptr;
  for (const clang::Decl *D : P.AST->getASTContext().getTranslationUnitDecl()->decls())
    if (const auto *F = llvm::dyn_cast<clang::FunctionDecl>(D))
      if (F->isMain() && F->hasBody())
        FD = F;
  P.Oracle = std::make_unique<SideEffectOracle>();
  P.Units = std::make_unique<FunctionUnits>(P.AST->getASTContext(), FD, *P.Oracle);
  P.Plan = std::make_unique<PrefetchPlanner>(*P.Units);
  P.HasThread = P.Plan->plan();
  return P;
}

TEST(PrefetchPlanner, StartsAfterTheBroadcastOfTheParameters) {
  Planned P = plan(R"(
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(0, &rank);
  long n = 0;
  if (rank == 0)
    n = parse(argv[2]);
  MPI_Bcast(&n, 1, 0, 0, 0);
  char buf[64];
  int fd = open(argv[1], O_RDONLY);
  for (long i = 0; i < n; i++)
    pread(fd, buf, sizeof buf, (i * 4 + rank) * 64);
  MPI_Finalize();
  return 0;
})");
  ASSERT_TRUE(P.HasThread);
  EXPECT_EQ(P.Plan->startIndex(), 6); // right after MPI_Bcast
  ASSERT_EQ(P.Plan->decisions().size(), 1u);
  EXPECT_TRUE(P.Plan->decisions()[0].Prefetched);
  std::vector<std::string> Names;
  for (const clang::VarDecl *VD : P.Plan->captured())
    Names.push_back(VD->getNameAsString());
  EXPECT_EQ(Names, (std::vector<std::string>{"argv", "rank", "n"}));
}

TEST(PrefetchPlanner, OffsetFromFileDataIsNotPrefetched) {
  Planned P = plan(R"(
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int fd = open(argv[1], O_RDONLY);
  long next = 0;
  char buf[16];
  for (int i = 0; i < 8; i++) {
    pread(fd, &next, sizeof next, 8 * i);
    pread(fd, buf, sizeof buf, next);
  }
  return 0;
})");
  ASSERT_TRUE(P.HasThread);
  ASSERT_EQ(P.Plan->decisions().size(), 2u);
  EXPECT_TRUE(P.Plan->decisions()[0].Prefetched);
  EXPECT_FALSE(P.Plan->decisions()[1].Prefetched);
  EXPECT_NE(P.Plan->decisions()[1].Reason.find("data read into 'next'"), std::string::npos)
      << P.Plan->decisions()[1].Reason;
}

TEST(PrefetchPlanner, ReadsOfAWrittenFileAreMarkedAfterWrite) {
  Planned P = plan(R"(
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  char buf[16] = {0};
  int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
  int in = open(argv[2], O_RDONLY);
  for (int i = 0; i < 8; i++)
    pwrite(fd, buf, sizeof buf, 16 * i);
  for (int i = 0; i < 8; i++) {
    pread(fd, buf, sizeof buf, 16 * i);
    pread(in, buf, sizeof buf, 16 * i);
  }
  return 0;
})");
  ASSERT_TRUE(P.HasThread);
  ASSERT_EQ(P.Plan->decisions().size(), 2u);
  EXPECT_EQ(P.Plan->decisions()[0].Flags, 1u); // PPIOS_PF_AFTER_WRITE
  EXPECT_EQ(P.Plan->decisions()[1].Flags, 0u);
}

TEST(PrefetchPlanner, ABadDefinitionOnlyReachesLaterUses) {
  Planned P = plan(R"(
void consume(long *);
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  char buf[64];
  long n = 8;
  int fd = open(argv[1], O_RDONLY);
  for (long i = 0; i < n; i++)
    pread(fd, buf, sizeof buf, i * 64);
  consume(&n);
  for (long off = 0; off < n; ) {
    pread(fd, buf, sizeof buf, off);
    consume(&off);
  }
  MPI_Finalize();
  return 0;
})");
  ASSERT_TRUE(P.HasThread);
  ASSERT_EQ(P.Plan->decisions().size(), 2u);
  // consume(&n) comes after the first loop: it does not make n unknown there.
  EXPECT_TRUE(P.Plan->decisions()[0].Prefetched);
  // consume(&off) runs before the read's next iteration.
  EXPECT_FALSE(P.Plan->decisions()[1].Prefetched);
  EXPECT_NE(P.Plan->decisions()[1].Reason.find("consume"), std::string::npos)
      << P.Plan->decisions()[1].Reason;
}

TEST(PrefetchPlanner, AHandleAHelperOpensLaterIsHandedOver) {
  Planned P = plan(R"(
int open_input(int *fd, const char *path);
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  char buf[64];
  int fd = open(argv[1], O_RDONLY);
  for (long i = 0; i < 8; i++)
    pread(fd, buf, sizeof buf, i * 64);
  int late;
  open_input(&late, argv[2]);
  for (long i = 0; i < 8; i++)
    pread(late, buf, sizeof buf, i * 64);
  for (long i = 0; i < 8; i++) {
    int each;
    open_input(&each, argv[2]);
    pread(each, buf, sizeof buf, i * 64);
  }
  MPI_Finalize();
  return 0;
})");
  ASSERT_TRUE(P.HasThread);
  EXPECT_EQ(P.Plan->startIndex(), 1);
  ASSERT_EQ(P.Plan->handoffs().size(), 1u);
  EXPECT_EQ(P.Plan->handoffs()[0].Var->getName(), "late");
  ASSERT_EQ(P.Plan->decisions().size(), 3u);
  EXPECT_TRUE(P.Plan->decisions()[0].Prefetched);
  EXPECT_TRUE(P.Plan->decisions()[1].Prefetched);
  // Set inside a loop: not handed over, and the remark names the statement.
  EXPECT_FALSE(P.Plan->decisions()[2].Prefetched);
  EXPECT_NE(P.Plan->decisions()[2].Reason.find("'each' is set at line"), std::string::npos);
}

TEST(PrefetchPlanner, NoReadsNoThread) {
  Planned P = plan(R"(
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int fd = open(argv[1], O_WRONLY);
  write(fd, "x", 1);
  return 0;
})");
  EXPECT_FALSE(P.HasThread);
  EXPECT_TRUE(P.Plan->decisions().empty());
}

} // namespace
} // namespace ppios
