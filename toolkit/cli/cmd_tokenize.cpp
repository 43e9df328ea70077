// `metainfer tokenize` and `metainfer detokenize`: run a Hugging Face tokenizer.json (components/tokenizer) from
// the command line, e.g. to compare ids with another implementation or to inspect how a prompt is split.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace mi::cli {

namespace {

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Tokenizer::load, with every failure reported as bad input naming the file (tokenizer.json, or
// tokenizer_config.json when the message is about it), whatever part of the loader raised it.
tok::Tokenizer load_tokenizer(const std::string& dir) {
  const std::string file = (std::filesystem::path(dir) / "tokenizer.json").string();
  try {
    return tok::Tokenizer::load(dir);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.find("tokenizer.json") != std::string::npos || message.find("tokenizer_config.json") != std::string::npos)
      throw;
    fail(file, ": ", message);
  } catch (const std::exception& e) {
    fail(file, ": ", e.what());
  }
}

// "1, 2,3" -> {1, 2, 3}; "" -> {}. Each item must be a whole decimal integer.
std::vector<int32_t> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return ids;
  while (true) {
    const size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    while (!item.empty() && is_space(item.front())) item.erase(item.begin());
    while (!item.empty() && is_space(item.back())) item.pop_back();
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < INT32_MIN ||
        value > INT32_MAX) {
      fail("--ids: '", item, "' is not a token id (expected comma-separated integers, e.g. 9707,11,1879)");
    }
    ids.push_back(static_cast<int32_t>(value));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

void register_tokenize(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("tokenize", "Encode text to token ids with a tokenizer.json");
  cmd->footer(
      "Prints the ids comma-separated on one line (e.g. 9707,11,1879,0), or with --json one line\n"
      "{\"ids\": [...], \"tokens\": [...]} where tokens are the vocabulary strings (byte-level alphabet, e.g. "
      "\"Ġworld\").\nSpecial tokens written in the text (e.g. <|im_start|>) are matched as special tokens.\n"
      "Exit status: 0 ok; 1 standard output could not be written; 2 bad input (missing/unsupported tokenizer,\n"
      "unreadable file, text not UTF-8), the message naming the file.");
  struct Options {
    std::string tokenizer_dir, text, file;
    bool add_special = false, json = false;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--tokenizer", opts->tokenizer_dir, "directory with tokenizer.json (and tokenizer_config.json)")
      ->required();
  auto* text_opt = cmd->add_option("--text", opts->text, "text to encode (UTF-8)");
  auto* file_opt = cmd->add_option("--file", opts->file, "file whose bytes are the text to encode (UTF-8)");
  text_opt->excludes(file_opt);
  file_opt->excludes(text_opt);
  cmd->add_flag("--add-special", opts->add_special,
                "apply the tokenizer's post-processor (special tokens such as a BOS the tokenizer.json adds)");
  cmd->add_flag("--json", opts->json, "print {\"ids\": [...], \"tokens\": [...]}");
  cmd->callback([opts, text_opt, file_opt, &exit_code] {
    if (text_opt->count() == 0 && file_opt->count() == 0) fail("tokenize: give the text with --text S or --file F");
    const tok::Tokenizer tokenizer = load_tokenizer(opts->tokenizer_dir);
    const std::string text = file_opt->count() ? read_file_bytes(opts->file) : opts->text;
    const std::vector<int32_t> ids = tokenizer.encode(text, opts->add_special);
    if (opts->json) {
      nlohmann::json tokens = nlohmann::json::array();
      for (const int32_t id : ids) tokens.push_back(tokenizer.id_to_token(id));
      std::cout << nlohmann::json{{"ids", ids}, {"tokens", tokens}}.dump() << "\n";
    } else {
      std::string line;
      for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
      std::cout << line << "\n";
    }
    exit_code = kExitOk;
  });
}

void register_detokenize(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("detokenize", "Decode token ids to text with a tokenizer.json");
  cmd->footer(
      "Prints the decoded text exactly, with NO trailing newline added, so the output bytes are the text\n"
      "(special tokens are kept unless --skip-special; tokenizer_config.json's clean_up_tokenization_spaces is\n"
      "applied when it is true).\n"
      "Exit status: 0 ok; 1 standard output could not be written; 2 bad input (unknown id - the message names\n"
      "it -, malformed --ids, bad tokenizer: the message names the file).");
  struct Options {
    std::string tokenizer_dir, ids;
    bool skip_special = false;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--tokenizer", opts->tokenizer_dir, "directory with tokenizer.json (and tokenizer_config.json)")
      ->required();
  cmd->add_option("--ids", opts->ids, "comma-separated token ids, e.g. 9707,11,1879")->required();
  cmd->add_flag("--skip-special", opts->skip_special, "leave special tokens (e.g. <|im_end|>) out of the text");
  cmd->callback([opts, &exit_code] {
    const std::vector<int32_t> ids = parse_id_list(opts->ids);
    const tok::Tokenizer tokenizer = load_tokenizer(opts->tokenizer_dir);
    const std::string text = tokenizer.decode(ids, opts->skip_special);
    std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::cout.flush();
    exit_code = kExitOk;
  });
}

}  // namespace

void register_tokenize_commands(CLI::App& app, int& exit_code) {
  register_tokenize(app, exit_code);
  register_detokenize(app, exit_code);
}

}  // namespace mi::cli
