// SPI master and slave on a system clock: a test bench as an FPGA engineer writes one.
// tb.clk runs all the time (50 MHz); the master divides it into an SCLK that runs in bursts
// (one per transfer: CS low, 8-bit words, mode 0), the slave answers each command byte.
// The dump holds the hierarchy (tb, tb.u_master, tb.u_slave), nets seen in several scopes
// under one identifier (sclk is tb.sclk, tb.u_master.sclk_o, tb.u_slave.sclk), vectors,
// x (registers before reset) and z (MISO released while CS is high), a 1 ps timescale.
`timescale 1ns / 1ps

module spi_master #(parameter DIV = 6) (
    input  wire       clk, rst_n, start,
    input  wire [7:0] tx_byte,
    input  wire [1:0] n_bytes,
    output reg        sclk_o, mosi_o, cs_n_o,
    input  wire       miso_i,
    output reg [7:0]  rx_byte,
    output reg        busy
);
    reg [7:0] shreg;
    reg [5:0] div;
    reg [3:0] bitn;
    reg [1:0] left;
    reg [2:0] state;
    localparam IDLE = 0, SETUP = 1, LOW = 2, HIGH = 3, GAP = 4, HOLD = 5;
    always @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            sclk_o <= 0; mosi_o <= 0; cs_n_o <= 1; busy <= 0; state <= IDLE; div <= 0;
        end else begin
            case (state)
            IDLE: if (start) begin
                busy <= 1; cs_n_o <= 0; shreg <= tx_byte; left <= n_bytes; bitn <= 0; div <= 0;
                state <= SETUP;
            end
            SETUP: if (div == DIV) begin div <= 0; mosi_o <= shreg[7]; state <= LOW; end else div <= div + 1;
            LOW: if (div == DIV) begin div <= 0; sclk_o <= 1; rx_byte <= {rx_byte[6:0], miso_i}; state <= HIGH; end
                 else div <= div + 1;
            HIGH: if (div == DIV) begin
                div <= 0; sclk_o <= 0; shreg <= {shreg[6:0], 1'b0}; bitn <= bitn + 1;
                if (bitn == 7) begin bitn <= 0; state <= GAP; end
                else begin mosi_o <= shreg[6]; state <= LOW; end
            end else div <= div + 1;
            GAP: if (div == 2 * DIV) begin
                div <= 0;
                if (left == 0) state <= HOLD;
                else begin left <= left - 1; shreg <= rx_byte ^ 8'h5a; mosi_o <= rx_byte[7] ^ 1'b0; state <= LOW; end
            end else div <= div + 1;
            HOLD: if (div == DIV) begin div <= 0; cs_n_o <= 1; busy <= 0; state <= IDLE; end else div <= div + 1;
            endcase
        end
    end
endmodule

module spi_slave (
    input  wire sclk, cs_n, mosi,
    output wire miso
);
    reg [7:0] sh_in, sh_out;
    reg [2:0] cnt;
    reg       out_bit;
    reg [7:0] status;
    initial status = 8'hA5;
    assign miso = cs_n ? 1'bz : out_bit;          // released while CS is high
    always @(negedge cs_n) begin cnt <= 0; sh_out <= status; out_bit <= status[7]; end
    always @(posedge sclk) if (!cs_n) begin
        sh_in <= {sh_in[6:0], mosi};
        cnt <= cnt + 1;
        if (cnt == 7) status <= {sh_in[6:0], mosi} + 8'h11;
    end
    always @(negedge sclk) if (!cs_n) begin
        sh_out <= (cnt == 0) ? status : {sh_out[6:0], 1'b0};
        out_bit <= (cnt == 0) ? status[7] : sh_out[6];
    end
endmodule

module tb;
    // declared first, as a design's status registers are: a cycle counter and a register
    // bank put some 300 channels ahead of the SPI nets in the dump
    reg [15:0] cycles = 0;
    reg [31:0] bank0, bank1, bank2, bank3, bank4, bank5, bank6, bank7;
    reg clk = 0, rst_n = 0, start = 0;
    reg [7:0] cmd;
    reg [1:0] n;
    wire sclk, mosi, miso, cs_n;
    wire [7:0] rx;
    wire busy;
    always #10 clk = ~clk;                         // 50 MHz system clock, free-running
    always @(posedge clk) cycles <= cycles + 1;
    always @(posedge clk) if (start) begin
        bank0 <= {bank0[30:0], cmd[0]}; bank1 <= bank0 ^ {16'h0, cycles}; bank2 <= bank1 + 1;
        bank3 <= bank2; bank4 <= ~bank3; bank5 <= bank4 >> 1; bank6 <= bank5 | 32'h80; bank7 <= bank6;
    end
    spi_master u_master (.clk(clk), .rst_n(rst_n), .start(start), .tx_byte(cmd), .n_bytes(n),
                         .sclk_o(sclk), .mosi_o(mosi), .cs_n_o(cs_n), .miso_i(miso), .rx_byte(rx), .busy(busy));
    spi_slave u_slave (.sclk(sclk), .cs_n(cs_n), .mosi(mosi), .miso(miso));
    integer i;
    initial begin
        $dumpfile("spi_tb.vcd");
        $dumpvars(0, tb);
        #53 rst_n = 1;
        for (i = 0; i < 16; i = i + 1) begin
            #(400 + 130 * (i % 4));
            @(posedge clk) begin cmd <= 8'h30 + i * 7; n <= i % 3; start <= 1; end
            @(posedge clk) start <= 0;
            wait (busy);
            wait (!busy);
        end
        #1000 $finish;
    end
endmodule
