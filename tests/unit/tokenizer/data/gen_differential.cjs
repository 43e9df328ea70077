// Generates differential tokenizer cases with @huggingface/tokenizers 0.2.0 (the reference that produced
// tests/data/tokenizers/*.cases.jsonl). Output: one JSON object a line, same fields as cases.jsonl.
const { Tokenizer } = require(process.env.TOKENIZERS_JS || './package/dist/tokenizers.cjs');
const fs = require('fs');

let seed = 12345;
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const pick = (a) => a[Math.floor(rand() * a.length)];

const fixed = [
  "a\u0085b", "x \ufeff!y", "\ufeffBOM at start", "tab\t\u00a0nbsp\u3000ideographic\u2003em",
  "line\u2028sep\u2029para", "end with nel\u0085", "  \n  \n", "\r\n\r\n\r\n", "\r\r\n\n\r", " \r\n \t\r\n  x",
  "trailing spaces then newline   \n", "spaces   \t  before text", "\t\t\n\t", "a\u000bb\u000cc",
  "Arabic-Indic ٠١٢٣٤٥٦٧٨٩ and Devanagari ०१२३४५ Bengali ০১২৩ Thai ๑๒๓๔",
  "fullwidth １２３４５６ digits", "superscripts x²³ fractions ½¾ ⅞", "Roman Ⅻ ⅻ circled ①②③ ⑩",
  "12345678901234567890", "3.14159265358979 1,234,567.89 -0.5e+10", "v1.2.3-rc4 0x1F 0b1010 1_000_000",
  "cafe\u0301 nai\u0308ve re\u0301sume\u0301", "e\u0301\u0302\u0303\u0304 stacked", "\u0301 leading combining mark",
  "Z\u0351\u0352a\u0353\u0354l\u0355g\u0356o", "\u1100\u1161\u11a8 decomposed hangul", "Å vs A\u030a vs \u212b",
  "1\ufe0f\u20e3 keycap #\ufe0f\u20e3", "🏳️‍🌈 🏴‍☠️ 👩🏻‍💻 🧑🏾‍🤝‍🧑🏼", "🇺🇸🇬🇧🇩🇪 flags", "😀😃😄😁😆😅🤣😂",
  "𠀀𠀁𪜀 CJK ext B", "\u{2EBF0} ext I", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝟘𝟙𝟚", "I'M HE'S WE'RE THEY'VE I'LL YOU'D", "'s 'S 'Ll 'lL 're 'RE",
  "don't can't won't shouldn't", "it’s curly ’s apostrophe", "''''quoted''''", "rock 'n' roll",
  "Hello , world . Is it ? Yes ! I 'm n't 've 're 's ' ", "don 't stop ' ' ", " ,,, ... ??? !!!",
  "<|im_start|>", "<|im_start|><|im_end|><|endoftext|>", "x<|im_start|>y", "<|im_start|user", "<|im_start|>>",
  "<think></think>", "<tool_call>{\"a\":1}</tool_call>", "a<think>b</think>c", "<|begin_of_text|>hi<|eot_id|>",
  "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "<|reserved_special_token_5|>", "<<|im_end|>>",
  "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "\u0000nul \u001besc \u007fdel \u0080c1",
  "zero\u200bwidth\u200c\u200d\u2060joiners", "soft\u00adhyphen", "RTL \u202eevil\u202c override",
  "עברית עם ניקוד: שָׁלוֹם", "العربية: مَرْحَبًا ١٢٣", "हिन्दी: नमस्ते दुनिया १२३", "ไทย: สวัสดีครับ", "ქართული ენა",
  "Ελληνικά: Καλημέρα κόσμε", "Tiếng Việt có dấu: Xin chào thế giới", "Türkçe İı ŞşĞğ", "Straße ß ẞ ﬀ ﬃ",
  "中文标点：“你好”，『世界』！？（括号）【方括号】", "日本語：カタカナとひらがなと漢字、半角ｶﾀｶﾅ", "한국어: 안녕하세요, 세계!",
  "mixed中文English日本語한국어123", "    def f(x):\n        return x ** 2  # comment\n",
  "if (a && b || !c) { return a->b[0] <<= 2; } // C++", "SELECT * FROM t WHERE x >= 10 AND y <> 'z';",
  "$ ls -la | grep \"foo\" > /dev/null 2>&1", "https://例え.jp/パス?q=値#frag", "email+tag@sub.example.co.uk",
  "∀x∈ℝ: x² ≥ 0 ⇒ √x ∈ ℝ ∪ {∞}", "€100 £50 ¥1000 ₹500 ₿0.1 $5.00", "©®™ ℃ ℉ № ℗", "♠♥♦♣ ★☆ ✓✗ →←↑↓",
  "a\u00a0\u00a0b", " \u00a0 ", "\u3000\u3000全角スペース", "x\n\n\n\n\ny", "x \n \n y", "\n \n", " \t \n",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "ababababababababababababababababababababababababababab", "                                                                ",
  "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!", "1111111111111111111111111111111111111", "🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂",
];

const pools = [
  ["hello", "World", "the", "quick", "THE", "ça", "naïve", "Ünïcödé", "don", "'t", "'s", "'RE", "n't", "I'm"],
  [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "\u0085", "\ufeff", " \n", "\n\n", "\u200b"],
  ["0", "7", "42", "123", "4567", "٣", "٤٥٦", "१२", "१२३४", "๕", "１２", "²", "½", "Ⅳ", "①", "3.14", "-1"],
  [".", ",", "!", "?", "...", "—", "–", "-", "(", ")", "[", "]", "{", "}", "\"", "'", "’", "“", "”", "«", "»", "@", "#", "%", "&", "*", "/", "\\", "|", "~", "`", "^", "_", "+", "=", "<", ">", ";", ":"],
  ["你好", "世界", "漢字", "カタカナ", "ひらがな", "한국어", "ไทย", "हिन्दी", "العربية", "עברית", "русский", "Ελληνικά", "ქართული", "𠀀"],
  ["e\u0301", "a\u0308", "o\u0302\u0323", "\u0301", "\u0308", "n\u0303", "\u1100\u1161", "A\u030a"],
  ["😀", "🚀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "1️⃣", "❤️", "✨", "🏳️‍🌈"],
  ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<|begin_of_text|>", "<|eot_id|>", "<|im_start", "|>", "<"],
];

const texts = [...fixed];
for (let i = 0; i < 220; ++i) {
  const n = 1 + Math.floor(rand() * 14);
  let s = "";
  for (let k = 0; k < n; ++k) s += pick(pick(pools));
  texts.push(s);
}

for (const fam of ['qwen3', 'llama3']) {
  const dir = process.env.METAINFER_TOKENIZERS + '/' + fam;
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(dir + '/tokenizer.json')),
                            JSON.parse(fs.readFileSync(dir + '/tokenizer_config.json')));
  const lines = texts.map((text) => {
    const ids = tok.encode(text, { add_special_tokens: false }).ids;
    const ids_with_special = tok.encode(text, { add_special_tokens: true }).ids;
    const decoded = ids.length ? tok.decode(ids) : "";
    return JSON.stringify({ text, ids, ids_with_special, decoded });
  });
  fs.writeFileSync(`${__dirname}/${fam}.differential.jsonl`, lines.join("\n") + "\n");
  console.log(fam, lines.length);
}
