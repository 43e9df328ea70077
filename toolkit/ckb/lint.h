// `metainfer ckb check`: cross-reference lint of the CKB. Every finding names the file and the field.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "ckb/ckb.h"

namespace mi::ckb {

struct Finding {
  std::string severity;  // "error" | "warning"
  std::string file;      // the CKB file
  std::string field;     // e.g. "tests[0].file"
  std::string message;
};

// Checks, for every entry:
//  - contracts: stage is a known stage; status implemented|planned; depends_on names existing contracts; every
//    component file exists under repo_root; every platform named exists; at least one enforcing test, and for an
//    implemented contract each test reference resolves (file exists and holds a matching TEST/TEST_F/TEST_P);
//    a planned contract's missing test is a warning.
//  - families: every declared weight maps to an existing contract, its shape expressions use known config terms;
//    requires names existing contracts; forward steps are known generator steps; ids unique. Layer kinds: unique
//    ids, role mixer|mlp, forward steps known component steps whose contracts the family requires, a mixer kind for
//    every allowed layer_types value; a weight's kind names a declared kind and the weight has {L}; norm is w|1+w on
//    a 1-D weight; features name signals whose missing contract the family requires; name maps name one of the
//    family's architectures. A family declares [forward].layer or layer kinds, not both.
//  - platforms: kernel_level is a known level; requires lists known CPU features.
//  - signals: missing_contract named; condition kinds known.
//  - experience: every entry links at least one guarding test and it resolves; applies_to names are known.
//  - test contracts: enforced_by file exists; guarded_by tests resolve.
//  - roles (ckb/roles/*.toml, the one role table): the verifier is the only role without "declare PASS or FAIL" in
//    may_not; each required LLM role present and the verifier's row, id = file name, the verifier kind "code" (the
//    gate runner: no prompt, no tools) and no other role code; tools known to the tool sandbox, write_paths iff a
//    write tool, no write path reaching a protected file.
std::vector<Finding> lint(const Ckb& ckb, const std::filesystem::path& repo_root);

// Does `ref` resolve: the file/dir exists under repo_root and holds a GoogleTest matching the name pattern?
bool test_ref_resolves(const TestRef& ref, const std::filesystem::path& repo_root, std::string* why);

// The contract whose `steps` declare a forward step ("" if none does): the vocabulary of [forward] and
// [[layer_kinds]] lists. Whether the generator can write a step is its step table's business (coverage reports a
// declared step without an emitter as a gap).
std::string step_contract(const Ckb& ckb, const std::string& step);
// A config term some contract's `shape_terms` declares: what weight shape expressions may use.
bool is_shape_term(const Ckb& ckb, const std::string& term);

}  // namespace mi::ckb
