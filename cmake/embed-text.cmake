# Writes the file IN as a C array NAME (NUL-terminated) and NAME_len (its bytes, without the
# NUL) into OUT: the status page (src/cli/status-page.html) is compiled into gpuctl, so the
# server reads no file at run time and needs none installed. Run as cmake -P with -DIN= -DOUT=
# -DNAME=.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed-text.cmake: do not edit */\n"
     "#include <stddef.h>\n"
     "extern const char ${NAME}[];\nextern const size_t ${NAME}_len;\n"
     "const char ${NAME}[] = {\n${bytes}0};\n"
     "const size_t ${NAME}_len = ${len};\n")
