# Writes the file IN as a C array NAME (NUL-terminated) and NAME_len (its bytes, without the
# NUL) into OUT: the status page (src/cli/status-page.html) is compiled into gpuctl, so the
# server reads no file at run time and needs none installed. Also NAME_script_sha256, the hex
# SHA-256 of the text of the file's last <script> element (the page's one: its top comment
# names "<script>" too), for the page's Content-Security-Policy (script-src 'sha256-...': that
# script runs, no other script and no inline event handler does). Run as cmake -P with -DIN=
# -DOUT= -DNAME=.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" bytes "${bytes}")
file(READ "${IN}" text)
string(FIND "${text}" "<script>" open REVERSE)
string(FIND "${text}" "</script>" close)
if(open LESS 0 OR close LESS open)
  message(FATAL_ERROR "${IN}: no <script>...</script>")
endif()
math(EXPR from "${open} + 8")
math(EXPR count "${close} - ${from}")
string(SUBSTRING "${text}" ${from} ${count} script)
string(SHA256 script_sha256 "${script}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed-text.cmake: do not edit */\n"
     "#include <stddef.h>\n"
     "extern const char ${NAME}[];\nextern const size_t ${NAME}_len;\n"
     "extern const char ${NAME}_script_sha256[];\n"
     "const char ${NAME}_script_sha256[] = \"${script_sha256}\";\n"
     "const char ${NAME}[] = {\n${bytes}0};\n"
     "const size_t ${NAME}_len = ${len};\n")
