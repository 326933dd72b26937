# Prints each file that holds a brace block of more than `limit` lines other than a namespace
# (a function body, a class, a lambda, a table): the files clang-tidy's readability-function-size
# must look at. Every function body is such a block, so a file this skips has no long function.
# Comments, string and character literals are ignored.
#   awk -v limit=80 -f scripts/long_blocks.awk FILE...
FNR == 1 {
  depth = 0
  in_comment = 0
  flagged = 0
}
flagged { next }
{
  line = $0
  # Block comments, which may span lines.
  out = ""
  while (line != "") {
    if (in_comment) {
      end = index(line, "*/")
      if (end == 0) { line = ""; break }
      line = substr(line, end + 2)
      in_comment = 0
    } else {
      begin = index(line, "/*")
      if (begin == 0) { out = out line; line = ""; break }
      out = out substr(line, 1, begin - 1)
      line = substr(line, begin + 2)
      in_comment = 1
    }
  }
  line = out
  gsub(/\\\\/, "", line)
  gsub(/\\"/, "", line)
  gsub(/"[^"]*"/, "\"\"", line)
  gsub(/'[^']*'/, "''", line)
  cut = index(line, "//")
  if (cut > 0) line = substr(line, 1, cut - 1)
  n = length(line)
  for (i = 1; i <= n; ++i) {
    c = substr(line, i, 1)
    if (c == "{") {
      ++depth
      start[depth] = FNR
      before = substr(line, 1, i - 1)
      namespace_block[depth] = (before ~ /namespace[^;]*$/ || before ~ /extern "" *$/ || \
                                (before ~ /^[ \t]*$/ && last ~ /namespace[^;{}]*$/))
    } else if (c == "}" && depth > 0) {
      if (!namespace_block[depth] && FNR - start[depth] + 1 > limit) {
        print FILENAME
        flagged = 1
        depth = 0
        next
      }
      --depth
    }
  }
  if (line !~ /^[ \t]*$/) last = line
}
