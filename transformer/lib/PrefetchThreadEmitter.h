// Writes the prefetch thread of a planned function as C text: a context struct with the
// captured values, the thread function (the user's own statements of the slice, with reads
// turned into ppios_prefetch_* calls carrying sequence numbers, opens and closes into the
// PT's own, writes into counter increments), and the block that starts it in the MT.
//
// A pure renderer of the finished plan (ThreadPlan.h): every decision it writes down is
// the plan's, and it never asks the planner anything (it does not know it).
#ifndef PPIOS_TRANSFORMER_PREFETCHTHREADEMITTER_H
#define PPIOS_TRANSFORMER_PREFETCHTHREADEMITTER_H

#include "SourceText.h"
#include "StatementUnits.h"
#include "ThreadPlan.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ppios {

// NULL-safe stdio calls for the PT (its streams may be NULL where the MT's are not).
extern const char *const StdioHelpers;

class PrefetchThreadEmitter {
public:
  PrefetchThreadEmitter(const SourceText &Text, const FunctionUnits &Units,
                        const ThreadPlan &Plan);

  // Returns false (with why()) if the thread cannot be written (types it cannot name...).
  bool emit();
  const std::string &threadDefinition() const { return Definition; }
  // For a clone: its definition and prototype, with external linkage when other units
  // call it (a ppios-cc link), else static.
  std::string cloneDefinition(bool External) const;
  std::string clonePrototype(bool External) const;
  const std::string &startBlock() const { return Start; }
  // The MT's ppios_mt_handoff_* calls: (offset in the file, text to insert there).
  const std::vector<std::pair<unsigned, std::string>> &handoffs() const { return MtHandoffs; }
  // Offset in the main file where the start block goes.
  unsigned startOffset() const { return StartAt; }
  const std::string &why() const { return Why; }

  // True if the thread uses the NULL-safe stdio helpers (StdioHelpers).
  bool usesStdio() const { return UsesStdio; }
  // The helpers are defined once per file, by the caller (clones and main() share them).
  void setStdioHelpersProvided() { HelpersProvided = true; }
  // The program's own names that start with ppios_ (declared or defined as macros): the
  // PT's own names that are among them are spelled ppios_pt_<rest> instead.
  void setProgramNames(const std::set<std::string> *Names) { ProgramNames = Names; }
  // Name is one of the PT's own names that the emitter renames when the program uses it.
  static bool renamesOwnName(llvm::StringRef Name);

private:
  void editCloneCall(const CloneCallPlan &C);
  void addLoopPolls();
  void renameGlobalHandles();
  void renameHeapLocals();
  static std::string heapName(const HeapLocal &H, const char *Prefix);
  std::string heapDeclarations(const std::string &Before, const std::string &After) const;
  void addMemoryGuards();
  bool emitClone();
  std::string keptCalls(const Unit &U);
  void emitUnit(const Unit &U);
  void emitTakes(const Unit &U, const std::vector<HandoffTake> &Handoffs);
  void removeUnit(const Unit &U, const std::string &Replacement);
  void editCall(const IoCallSite &Site);
  std::string renderCall(const IoCallSite &Site);
  std::string pathArgument(const IoCallSite &Site);
  std::string declare(const clang::VarDecl *VD);
  std::string ownDeclaration(const clang::VarDecl *VD);
  std::string own(const std::string &Base) const;

  const SourceText &Text;
  const FunctionUnits &Units;
  const ThreadPlan &Plan;
  EditList Edits;
  std::string Definition, Start, Why;
  std::string CloneSignature, CloneBody; // a clone's, without its linkage
  std::vector<std::pair<unsigned, std::string>> MtHandoffs;
  unsigned StartAt = 0;
  bool UsesStdio = false;
  bool HelpersProvided = false;
  const std::set<std::string> *ProgramNames = nullptr;
  // The PT's counter as an lvalue and as a pointer, its context (set by emit()).
  std::string Seq = "ppios_seq", SeqPointer = "&ppios_seq", CtxName = "ppios_ctx";
  std::string Fn; // name of the function, for generated names
  struct PathCapture {
    std::string Field, Expression;
  };
  std::vector<PathCapture> Paths;
};

} // namespace ppios

#endif
