#include "table.hpp"

#include <libsmartcols/libsmartcols.h>

#include <cstdio>
#include <new>
#include <stdexcept>

namespace xendump::cli {

Table::Table(const std::vector<Column>& columns) : table_(scols_new_table()), columns_(columns.size()) {
    if (!table_) throw std::bad_alloc();
    for (const Column& c : columns) {
        // A truncated column gets a small share of the terminal as its width
        // hint, so that it, and not the others, gives way.
        const int flags = (c.right ? SCOLS_FL_RIGHT : 0) | (c.truncate ? SCOLS_FL_TRUNC : 0);
        libscols_column* column = scols_table_new_column(table_, c.name, c.truncate ? 0.1 : 0, flags);
        // The cells come escaped (escape_text: "\x1b" for ESC); libsmartcols
        // would escape their backslashes once more ("\x5cx1b").
        if (!column || scols_column_set_safechars(column, "\\") != 0) {
            scols_unref_table(table_);
            throw std::bad_alloc();
        }
    }
}

Table::~Table() { scols_unref_table(table_); }

void Table::add_row(const std::vector<std::string>& cells) {
    if (cells.size() != columns_)
        throw std::logic_error("table row of " + std::to_string(cells.size()) + " cells for " +
                               std::to_string(columns_) + " columns");
    libscols_line* line = scols_table_new_line(table_, nullptr);
    if (!line) throw std::bad_alloc();
    for (size_t i = 0; i < cells.size(); ++i)
        if (scols_line_set_data(line, i, cells[i].c_str()) != 0) throw std::bad_alloc();
}

void Table::print(bool headings) {
    scols_table_enable_noheadings(table_, !headings);
    std::fflush(stdout);  // libsmartcols writes to stdout's FILE: after what was printed before
    if (scols_print_table(table_) != 0) throw std::runtime_error("cannot print the table");
    std::fflush(stdout);
}

}  // namespace xendump::cli
