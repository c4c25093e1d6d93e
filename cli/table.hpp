// The tables the command-line tools print (list, status, the converter's
// report), through libsmartcols, what lsblk and findmnt print with: columns
// as wide as their widest cell, on a terminal the columns marked `truncate`
// cut to its width, on a pipe or in a file every line whole.
#pragma once

#include <string>
#include <vector>

struct libscols_table;

namespace xendump::cli {

class Table {
public:
    struct Column {
        const char* name;
        bool right = false;     // right-aligned (numbers, sizes)
        bool truncate = false;  // cut to what the terminal leaves (the last, long, text column)
    };
    explicit Table(const std::vector<Column>& columns);
    ~Table();
    Table(const Table&) = delete;
    Table& operator=(const Table&) = delete;

    // One row: a cell for each column, in their order (text as it is shown:
    // the caller escapes what came from a guest or a file).
    void add_row(const std::vector<std::string>& cells);
    // On standard output; `headings` false: the rows alone (--no-legend).
    void print(bool headings = true);

private:
    libscols_table* table_;
    size_t columns_;
};

}  // namespace xendump::cli
